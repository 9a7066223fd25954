"""Parameters of the SnD defense and its baselines."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

import dpkit


class DataRef(dpkit.Params):
    """A registered dataset by name, with its params."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class DenoiserParams(dpkit.TrainingParams.part(
        epochs=2, max_epochs=100, epochs_help="passes over the public texts (the most, with "
        "patience)", patience_help="stop once the loss on the held-out public texts has not "
        "improved for this many epochs, keeping the best epoch's parameters; None: train every "
        "epoch")):
    """Denoiser sizes (None = scaled to the encoder: d_model = its width, d_ff = d_model, 64-d
    heads) and its training on public data with synthetic noise (App. A.5.2–A.5.3)."""

    d_model: int | None = Field(None, ge=8, le=4096)
    d_ff: int | None = Field(None, ge=8, le=16384)
    n_head: int | None = Field(None, ge=1, le=64)
    n_layers: int = Field(3, ge=1, le=24)
    public: DataRef = Field(default_factory=lambda: DataRef(name="news_articles"),
                            description="public corpus the denoiser is trained on")
    public_split: str = "train"
    public_examples: int = Field(2000, ge=8, description="public texts used for training")
    validation_examples: int = Field(200, ge=1, description="public texts held out (the split's "
                                     "last ones, at most a fifth of it) for the validation curve "
                                     "and, with patience, for stopping")
    batch_size: int = Field(32, ge=2, le=4096)
    lr: float = Field(3e-4, gt=0, le=1.0)


class CommonParams(dpkit.TrainingParams.part(
        "classifier", epochs=30, max_epochs=1000, epochs_help="downstream classifier epochs (the "
        "most, with classifier_patience)", patience_help="stop the downstream classifier once "
        "its validation loss has not improved for this many epochs, keeping the best epoch; "
        "None: train every epoch")):
    """What every SnD-family defense shares: evaluation data sizes and downstream classifier."""

    max_tokens: int = Field(32, ge=4, le=512, description="tokens per text (truncation)")
    train_examples: int = Field(1000, ge=4, description="downstream training texts (subsample)")
    test_examples: int | None = Field(500, ge=4, description="downstream test texts "
                                      "(subsample); None: the whole test split")
    train_split: str = "train"
    test_split: str = "test"
    batch_size: int = Field(64, ge=1, le=4096)
    classifier_validation: float = Field(
        0.1, gt=0, lt=0.5, description="share of the downstream training texts held out for the "
        "classifier's validation curve (the classifier trains on the rest; never test data)")
    mi_tokens: int = Field(2000, ge=20, description="token sample for the MI estimate")
    mi_k: int = Field(3, ge=1, le=50)
    view_tokens: int = Field(4000, ge=1, description="test tokens exposed to the attacks")


class NoisyParams(CommonParams):
    """A defense that privatizes token embeddings with a registered dχ mechanism."""

    eta: float = Field(gt=0, description="dχ privacy parameter η per token; .inf sends the "
                       "tokens without noise (the noiseless ceiling: ε = ∞ on the ledger)")
    mechanism: str = Field("laplace_dx", description="registered embedding mechanism to use")
    clip: bool = Field(True, description="clip noisy embeddings to the table's max norm (Eq. 3)")


class TokEmbPrivParams(NoisyParams):
    """TokEmbPriv as in the paper's baseline: noise without clipping unless ``clip`` is set."""

    clip: bool = Field(False, description="clip noisy embeddings to the table's max norm (Eq. 3)")


class SnDParams(NoisyParams):
    """SnD: noise + clip on the client, encoder on the server, client-side denoiser."""

    eta_groups: list[list[float]] = Field(
        default_factory=lambda: [[50.0, 100.0], [200.0, 400.0], [800.0, 1600.0]],
        description="η groups; one denoiser per group, trained on the group's η levels")
    denoiser: DenoiserParams = Field(default_factory=DenoiserParams)

    @field_validator("eta_groups")
    @classmethod
    def _groups_positive(cls, groups: list[list[float]]) -> list[list[float]]:
        if not groups or any(not g or min(g) <= 0 for g in groups):
            raise ValueError(f"eta_groups must be non-empty lists of positive η, got {groups!r}")
        return groups


class ServerDenoiseParams(SnDParams):
    """Server-side denoise ablation (A.12): same denoiser settings, trained without noise input."""


class Text2TextParams(CommonParams):
    """Text2Text: noise, then the nearest token, then the server embeds that token sequence."""

    eta: float = Field(gt=0, allow_inf_nan=False, description="dχ privacy parameter η per token")
    mechanism: str = Field("text2text", description="registered token mechanism to use")
