"""Parameters of the ObfusLM defenses, mechanism and attacks, importable without torch
(``dpkit validate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import dpkit


class ObfuscationParams(dpkit.Params):
    """EmbedCluster / WeightSynth parameters and the ObfusLM+ variant."""

    k: int = Field(10, ge=1, le=1024, description="requested cluster size (anonymity set)")
    beta: float = Field(0.99, ge=0.0, lt=1.0, description="similarity quantile threshold ratio")
    epsilon: float = Field(1.0, gt=0.0, le=100.0, description="WeightSynth privacy parameter")
    calibration: Literal["exact", "faithful"] = Field(
        "exact", description="exact: one Laplace scale per cluster from the true L1 sensitivity "
        "(ε holds); faithful: the paper's per-row scale (ledger ε = ∞)")
    mix: bool = Field(True, description="False: permutation only, no WeightSynth (the noiseless "
                      "ceiling: rows stay the original embeddings; ledger ε = ∞)")
    plus: bool = Field(False, description="ObfusLM+: also obfuscate the hidden dimension (Eq. 2)")
    k_star: int = Field(10, ge=1, le=1024, description="ObfusLM+ cluster size over hidden dims")
    epsilon_star: float = Field(3.0, gt=0.0, le=100.0, description="ObfusLM+ WeightSynth ε*")


class TrainParams(dpkit.TrainingParams.part(
        epochs=2, max_epochs=50, epochs_help="fine-tuning epochs (the most, with patience)",
        patience_help="stop fine-tuning once the validation stop_on has not improved for this "
        "many epochs and keep the best epoch's parameters; None: train every epoch")):
    """Fine-tuning, data and attack-view options shared by ObfusLM and its plaintext baseline."""
    stop_on: Literal["loss", "accuracy"] = Field("loss", description="what patience watches on "
                                                 "the validation texts: cross-entropy or "
                                                 "accuracy")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32", description="bf16: the encoder runs under bfloat16 autocast (mixed precision: "
        "fp32 weights and optimizer, bf16 matrix products), about 2x faster on CPUs with bf16 "
        "instructions")
    lr: float = Field(5e-5, gt=0, le=1, description="learning rate of the encoder body")
    head_lr: float = Field(1e-3, gt=0, le=1, description="learning rate of the linear head")
    batch_size: int = Field(32, ge=1, le=4096)
    max_length: int = Field(64, ge=4, le=512, description="tokens per text (truncated)")
    max_train: int | None = Field(None, ge=2, description="cap on fine-tuning texts")
    validation_share: float = Field(0.1, gt=0.0, lt=0.5, description="validation texts for the "
                                    "fine-tuning curve, as a share of max_train (the train "
                                    "split's next texts; taken off the fine-tuning texts where "
                                    "the split has too few)")
    validation_size: int | None = Field(None, ge=1, description="validation texts (overrides "
                                        "validation_share; taken the same way)")
    validate_every: int | None = Field(None, ge=1, description="validate (and count patience) "
                                       "after every this many training texts, across epochs, "
                                       "instead of once an epoch: the same stopping rule at "
                                       "every training budget")
    group_by_length: bool = Field(False, description="batch texts of similar length together "
                                  "(random windows of 8 batches sorted by length, batches "
                                  "shuffled): less padding, same kind of random batches")
    max_test: int | None = Field(None, ge=1, description="cap on inference texts")
    public_dataset: str | None = Field(None, description="the attacker's public corpus (a "
                                       "registered dataset that shares no record with the "
                                       "private data; the server loads it by name); none: "
                                       "token_frequency has nothing to match against")
    public_params: dict = Field(default_factory=dict)
    public_max: int = Field(2000, ge=1, description="public texts the attacker tokenizes")
    attack_docs: int = Field(400, ge=1, description="received documents the attacks see (the "
                             "first ones the server received: training texts first)")


class ObfusLMParams(ObfuscationParams, TrainParams):
    """ObfusLM classification: obfuscation parameters plus fine-tuning options."""


class GenerateParams(ObfuscationParams):
    """ObfusLM generation: obfuscation, LoRA fine-tuning and decoding options."""

    steps: int = Field(20, ge=0, le=100_000, description="LoRA optimisation steps")
    batch_size: int = Field(4, ge=1, le=512)
    lr: float = Field(1e-4, gt=0, le=1)
    lora_r: int = Field(8, ge=1, le=512)
    lora_alpha: int = Field(16, ge=1)
    max_length: int = Field(48, ge=8, le=1024, description="tokens per fine-tuning text")
    max_train: int = Field(64, ge=1, description="fine-tuning texts")
    validation_share: float = Field(0.1, gt=0.0, lt=0.5, description="validation texts for the "
                                    "LoRA curve, as a share of max_train (the train split's next "
                                    "texts; taken off the fine-tuning texts where it has too few)")
    prompt_tokens: int = Field(12, ge=1, le=512)
    new_tokens: int = Field(12, ge=1, le=512)
    n_eval: int = Field(8, ge=1, le=10_000, description="prompts completed at inference")
    obfuscate: bool = Field(True, description="false: the plaintext reference run")


class TableParams(ObfuscationParams):
    """EmbedCluster / WeightSynth parameters (``plus`` is not used by the table mechanism)."""


class KnnPlusParams(dpkit.Params):
    """KNN+ options."""

    metric: Literal["l2", "cosine"] = Field("cosine", description="distance in the public table")


class LearnedInversionParams(dpkit.Params):
    """InvBert-style attack: an inversion network trained on the attacker's own obfuscations."""

    draws: int = Field(2, ge=1, le=16, description="own WeightSynth draws used as training data")
    steps: int = Field(300, ge=0, le=100_000, description="Adam steps (0: plain KNN)")
    hidden: int = Field(768, ge=8, le=8192)
    lr: float = Field(1e-3, gt=0, le=1)
    batch_size: int = Field(512, ge=8)
