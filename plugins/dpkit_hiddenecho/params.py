"""Parameters of the HiddenEcho defenses and their baselines."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

import dpkit


class SplitTrainingParams(dpkit.TrainingParams.part(
        epochs=2, max_epochs=100, epochs_help="training epochs (the most, with patience)",
        patience_help="stop once the validation stop_on has not improved for this many epochs "
        "and keep the best epoch's parameters (needs val_fraction > 0); None: train every "
        "epoch")):
    """What every split-learning variant shares: dχ noise, LoRA fine-tuning, training, evaluation."""

    eta: float = Field(gt=0, description="dχ privacy parameter η of laplace_dx; .inf sends the "
                       "embeddings without noise (the non-private ceiling: ε = ∞ on the ledger)")
    clip_bound: float | None = Field(None, gt=0, description="clip noisy embeddings (laplace_dx)")
    stop_on: Literal["loss", "auc"] = Field("loss", description="what patience watches on the "
                                            "validation examples: cross-entropy (lower is "
                                            "better) or AUC (higher is better)")
    batch_size: int = Field(32, ge=2, le=1024)
    lr: float = Field(1e-3, gt=0, le=1.0, description="AdamW rate of the client modules")
    lora_lr: float = Field(5e-4, gt=0, le=1.0, description="AdamW rate of LoRA and server maps")
    warmup: float = Field(0.1, ge=0, lt=1, description="fraction of steps with a linear "
                          "warm-up; the rate then decays linearly to 0 (Hugging Face's default)")
    max_grad_norm: float | None = Field(1.0, gt=0, description="clip each side's gradient norm "
                                        "(client and server separately); None: no clipping")
    lora_rank: int = Field(8, ge=1, le=256)
    lora_alpha: float = Field(16.0, gt=0)
    lora_layers: int | None = Field(None, ge=1, description="adapt only the last n blocks "
                                    "(None: all, as in the paper)")
    frozen_dropout: bool = Field(False, description="dropout in the frozen blocks below the "
                                 "first adapter (peft's default is on); off, they are a fixed "
                                 "feature extractor whose outputs are computed once per example")
    reuse_frozen: bool = Field(True, description="replay the frozen blocks' stored outputs on "
                               "later epochs instead of recomputing them (needs frozen_dropout "
                               "off; results equal up to float rounding)")
    lora_targets: list[str] | None = Field(None, description="LoRA module names (None: peft's "
                                           "default for the model type)")
    max_length: int = Field(64, ge=4, le=2048, description="tokens kept per text")
    train_examples: int | None = Field(None, ge=2, description="cap on training examples used")
    test_examples: int | None = Field(None, ge=2, description="cap on test examples used")
    val_fraction: float = Field(0.1, ge=0, lt=1, description="share of the training examples "
                                "(the last ones) held out for the validation curve, not trained "
                                "on; 0: no validation loss")
    train_split: str = "train"
    test_split: str = "test"
    pooling: Literal["auto", "mean", "last", "first"] = Field(
        "auto", description="auto: mean for encoders, last token for causal LMs")
    attack_tokens: int = Field(2000, ge=0, description="noisy test tokens put in the server view")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32", description="bf16: the server's transformer blocks (LoRA-adapted and frozen) run "
        "under bfloat16 autocast (mixed precision: fp32 weights and optimizer state, bf16 matrix "
        "products); the server's down-sampling maps, the client's denoiser and head, the MINE "
        "critics, the layer filter and every loss stay fp32, and the hidden states are cast to "
        "fp32 before they are sent, so bytes and the ledger are unchanged. Faster on CPUs with "
        "bf16 instructions")

    @model_validator(mode="after")
    def _patience_needs_validation(self) -> SplitTrainingParams:
        if self.patience is not None and self.val_fraction == 0:
            raise ValueError(f"patience={self.patience} stops on the validation examples, but "
                             "val_fraction=0 holds out no validation examples; set val_fraction "
                             "> 0 or patience to None")
        return self


class HiddenEchoParams(SplitTrainingParams):
    """HiddenEcho: layer filter, dimension reducer with the IB loss, gated residual denoiser."""

    layers: Literal["filter", "fixed", "all"] = Field(
        "filter", description="filter: top-k by integrated gradients; fixed: evenly spaced "
        "(−HLF ablation); all: every layer")
    top_k: int = Field(1, ge=0, le=128, description="layers chosen by the filter (besides the last)")
    keep_last: bool = Field(True, description="always send the last layer")
    reduction: Literal["ib", "linear", "none"] = Field(
        "ib", description="ib: learned maps + information bottleneck; linear: maps only (−DR); "
        "none: send full-width states, reduce on the client")
    reduction_factor: int = Field(8, ge=1, le=64, description="r, with d' = d / r")
    residual: bool = Field(True, description="residual connections in the denoiser (−Res: false)")
    ib_alpha: float = Field(0.1, ge=0, description="α, weight of the IB loss (Eq. 13)")
    ib_beta: float = Field(0.5, ge=0, description="β of Eq. 12")
    mine_steps: int = Field(1, ge=1, le=100, description="critic steps per training step")
    mine_tokens: int = Field(256, ge=8, description="token pairs per MINE estimate")
    ig_steps: int = Field(8, ge=1, le=256, description="m, Riemann steps of Eq. 11")
    ig_samples: int = Field(16, ge=1, description="training samples for the layer filter")
    ig_baseline: Literal["mean", "zero"] = Field(
        "mean", description="path start of IG; zero is Eq. 10 as printed (degenerate after norms)")
    denoiser_heads: int = Field(4, ge=1)
    dropout: float = Field(0.1, ge=0, lt=1)


class HiddenEchoFullParams(HiddenEchoParams):
    """HiddenEcho-Full: every layer, full width on the wire, no IB loss."""

    layers: Literal["all"] = "all"
    reduction: Literal["none"] = "none"
    ib_alpha: float = Field(0.0, ge=0, le=0)


class LdpParams(SplitTrainingParams):
    """LDP baseline: noisy embeddings up, the last hidden state down, no correction."""
