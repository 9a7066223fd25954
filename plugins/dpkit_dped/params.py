"""Parameters of the DPED family, importable without torch (``dpkit validate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

import dpkit


class CorpusParams(dpkit.Params):
    """Corpora, vocabulary and skip-gram settings shared by every DPED-family defense."""

    public_data: str = "news_articles"
    public_data_params: dict = Field(default_factory=dict)
    public_split: str = "train"
    max_public_docs: int | None = Field(None, ge=1)
    private_split: str = "train"
    heldout_split: str = "test"
    max_private_docs: int | None = Field(None, ge=1)
    heldout_pairs: int = Field(20000, ge=1)
    validation_share: float = Field(0.05, gt=0, lt=1)
    validation_pairs: int = Field(5000, ge=1)
    vocab_size: int = Field(3000, ge=10)
    min_count: int = Field(5, ge=1)
    dim: int = Field(100, ge=2)
    window: int = Field(5, ge=1)
    epochs: int = Field(5, ge=1)
    negative: int = Field(5, ge=1)
    workers: int = Field(1, ge=1, description=(
        "gensim threads; 1 (default) makes every model a function of the seed, more trains "
        "faster but gensim's threads race, so reruns of the same seed differ"))
    topic_data: str | None = Field("20newsgroups", description=(
        "labelled corpus of the downstream topic classifier on averaged word vectors (the paper's "
        "IMDb sentiment task is not reachable here); None skips it"))
    topic_data_params: dict = Field(default_factory=dict)


class EnsembleParams(CorpusParams, dpkit.TrainingParams.part(
        "teacher", epochs=None, max_epochs=None, epochs_help=(
            "epochs of each teacher (at most, with teacher_patience); None: `epochs`, as the "
            "public and non-private skip-grams"), patience_help=(
            "stop each teacher once the loss of documents held out of its own shard has not "
            "improved for this many epochs (of at most `epochs`) and keep its best epoch; None "
            "trains `epochs`"))):
    """The teacher ensemble: N skip-grams on disjoint hashed shards of the private corpus."""

    teachers: int = Field(20, ge=2)
    teacher_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of each teacher's shard held out to stop on when teacher_patience is set"))


class TeacherParams(EnsembleParams, dpkit.TrainingParams.part(
        "student", epochs=20, max_epochs=None, epochs_help="student epochs (the most, with "
        "student_patience)", patience_help=(
            "stop the student once its loss on held-out released answers has not improved for "
            "this many epochs and keep its best epoch (the start included); None trains "
            "student_epochs"))):
    """Teacher ensemble, noisy aggregation and student settings (DPED and PATE)."""

    target_epsilon: float = Field(2.0, gt=0)
    accounting: Literal["composed", "paper"] = Field("composed", description=(
        "composed: σ calibrated so that all num_queries queries together spend target_epsilon; "
        "paper: σ from the paper's per-query formula with ε = target_epsilon per query and "
        "release and its sensitivities (1, C/N), not composed — the ledger still records what "
        "the queries really spend, composed with the true sensitivities"))
    noiseless: bool = Field(False, description=(
        "σ = 0 on every release: the pipeline's noiseless reference, recorded as ε = ∞ "
        "(target_epsilon is then unused)"))
    num_queries: int = Field(3000, ge=1)
    target: Literal["soft", "hard"] = Field("soft", description=(
        "soft: release the noisy sum of the teachers' probability vectors and train Eq. 4 against "
        "their noisy mean (§3.1: each teacher's output is a distribution); hard: release only "
        "the noisy argmax label (Alg. 1, line 26, read literally)"))
    shrinkage: Literal["wiener", "none"] = Field("wiener", description=(
        "post-processing of the noisy soft targets and hidden means: shrink each toward the "
        "public model's prediction by a Wiener factor of the known noise std (dpkit_dped.targets); "
        "none: use the releases as they are"))
    threshold: Literal["noisy", "faithful"] = "noisy"
    threshold_votes: float = Field(5.0, ge=0, description=(
        "r: a query is answered when the top entry of the teachers' summed outputs (votes, or "
        "probability mass under soft targets) plus N(0, σ₁²) reaches r"))
    share_threshold: float = Field(0.2, gt=0)
    share_votes: float = Field(0.2, gt=0)
    student_holdout_share: float = Field(0.1, gt=0, lt=1, description=(
        "share of the answered queries held out to stop on when student_patience is set"))
    student_keep_start_level: float | None = Field(0.05, gt=0, lt=1, description=(
        "the best held-out epoch replaces the student's start only if its held-out gain is "
        "significant at this one-sided level (mean gain > 0 and a Wilcoxon signed-rank test over "
        "held-out answers against their unbiased noisy targets, Bonferroni over the epochs "
        "compared); null: always"))
    student_finish: Literal["fold_in", "rerun", "none"] = Field("fold_in", description=(
        "after a kept epoch (chosen on held-out answers, kept only if its gain is significant): "
        "fold_in fits every answered word's input vector to its own terms with the kept output "
        "layer frozen; rerun trains again from the start on every answer for the kept number of "
        "epochs; none keeps the selection run, whose held-out words never trained"))
    student_lr: float = Field(0.02, gt=0)
    student_batch: int = Field(512, ge=1)
    output_loss: Literal["squared", "cross_entropy"] = Field("cross_entropy", description=(
        "the student's output term: cross_entropy against the soft target (the default: it "
        "weighs every context word by log-loss, as the perplexity does) or Eq. 4's squared "
        "distance ‖softmax(y_S) − ŷ‖² (the paper's, whose gradient on a word of probability p "
        "is O(p), so it leaves the low-probability tail where most of the log-loss lies)"))
    student_init: Literal["random", "public"] = "random"


class DpedParams(TeacherParams):
    """DPED: adds the noisy mean of clipped teacher vectors."""

    clip: float = Field(1.0, gt=0)
    share_hidden: float = Field(0.6, gt=0)
    hidden_weight: float = Field(1.0, ge=0)
    output_weight: float = Field(1.0, ge=0, description=(
        "weight of Eq. 4's output term; 0 trains on the hidden channel alone (a measurement row)"))
    hidden_target: Literal["public_norm", "released"] = Field("public_norm", description=(
        "public_norm: the direction of the (shrunk) noisy mean at the public vector's length "
        "(post-processing: clipping to C shrinks the teachers' vectors); released: the noisy "
        "mean of clipped vectors as it is (the paper's H̃)"))


class PateParams(TeacherParams):
    """PATE: the same teachers and queries, teacher outputs only."""

    share_votes: float = Field(0.8, gt=0)
    output_loss: Literal["squared", "cross_entropy"] = "cross_entropy"


class SgdParams(CorpusParams):
    """The SGD recipe shared by DP-SGD and its non-private twin."""

    sampling_rate: float = Field(0.01, gt=0, le=1)
    steps: int = Field(400, ge=1)
    pairs_per_doc: int = Field(32, ge=1)
    max_doc_len: int = Field(1000, ge=2)
    lr: float = Field(0.05, gt=0)
    optimizer: Literal["sgd", "adam"] = "sgd"
    momentum: float = Field(0.9, ge=0, lt=1)
    init: Literal["random", "public"] = "random"


class DpsgdParams(SgdParams):
    """DP-SGD settings: the recipe plus target ε, clipping norm and steps per ε.

    ``steps_by_epsilon`` maps a target ε to its step count (chosen on public data with
    ``python -m dpkit_dped.tune_steps``); other targets use ``steps``. σ is calibrated for the
    step count actually run.
    """

    target_epsilon: float = Field(2.0, gt=0)
    steps_by_epsilon: dict[float, int] = Field(default_factory=dict)
    max_grad_norm: float = Field(1.0, gt=0)
    clipping: Literal["sparse", "opacus"] = "sparse"

    def step_count(self) -> int:
        """Steps run at this target ε."""
        return int(self.steps_by_epsilon.get(self.target_epsilon, self.steps))


class NonPrivateParams(CorpusParams):
    """Non-private skip-gram (no extra settings)."""
