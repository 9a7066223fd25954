"""Component protocols: what a registered mechanism, defense, attack, dataset or model provides.

Every component is a class with a class attribute ``name`` (its registry key), a pydantic
``Params`` model (``extra="forbid"``, bounds declared with ``Field``; subclass
:class:`dpkit.contract.params.Params`) and an ``__init__(self, params)``. The runner builds it with
``cls(cls.Params.model_validate(raw))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from dpkit.release.tokens import ReleasesVerbatim, SequenceLevel, is_sequence_level  # noqa: F401 (re-exported)
from dpkit.release.view import ServerView  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    import torch
    from pydantic import BaseModel

    from dpkit.accounting.guarantees import Guarantee
    from dpkit.contract.context import AttackContext, RunContext
    from dpkit.contract.privacy import PrivacySettings
    from dpkit.text.space import EmbeddingSpace
    from dpkit.release.wire import Release


@runtime_checkable
class Mechanism(Protocol):
    """A randomized map applied by the data owner; declares its guarantee before it runs.

    ``domain`` is ``"embedding"`` (float tensor ``[..., d]`` in, same shape out), ``"token"``
    (token ids ``[...]`` in, token ids out) or ``"table"`` (an embedding table in, a table out).
    Mechanisms whose output law is computable also implement one of the optional methods
    ``log_density(x, y)`` (continuous: ``log p(y | x)`` per row) or ``output_log_probs(ids, space)``
    (discrete: ``[n, V]`` log-probabilities), which :mod:`dpkit.audit` uses for exact privacy loss.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    domain: ClassVar[str]
    params: BaseModel

    def guarantee(self, space: EmbeddingSpace | None = None) -> Guarantee:
        """The guarantee of one application (one token for per-token mechanisms)."""

    def privatize(
        self, x: torch.Tensor, *, space: EmbeddingSpace | None, generator: torch.Generator
    ) -> torch.Tensor:
        """Apply the mechanism to a batch; randomness comes only from ``generator``."""


@dataclass
class DefenseResult:
    """Outcome of one defense run on the client: metrics, the truth attacks are scored against,
    and bytes on the wire.

    The attacks never see this object: they run in the server process on what the server kept
    (:class:`dpkit.Server`), and their guesses come back to be scored here against ``truth``
    (e.g. ``"token_ids"`` of the rows the server kept, ``"attributes"``). ``wire_bytes`` defaults
    to the wire's totals; ``training_curves`` (see :func:`dpkit.ml.training.attach_curves`) go to
    ``results.jsonl``.
    """

    metrics: dict[str, float]
    truth: dict[str, Any] = field(default_factory=dict)
    wire_bytes: dict[str, int] = field(default_factory=dict)
    training_curves: list[dict[str, Any]] = field(default_factory=list)


@runtime_checkable
class Defense(Protocol):
    """An end-to-end protocol around a model: ``run`` is its client (trusted) part; everything
    it sends up crosses ``ctx.wire`` to its server part, the class attribute ``server`` (a
    :class:`dpkit.Server` subclass, default the passive ``dpkit.Server``), which runs in its own
    process.

    Declare releases with :class:`DeclaresReleases` (or ``ctx.wire.declare`` inside ``run``);
    spends that go straight to ``ctx.ledger`` are allowed for releases that are not tensors.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    params: BaseModel

    def run(self, ctx: RunContext) -> DefenseResult:
        """Run the protocol on ``ctx.dataset`` / ``ctx.model`` and report metrics and the view."""


@runtime_checkable
class Attack(Protocol):
    """Guesses private values from what crossed the wire; a separate scorer meets the truth.

    The runner calls ``run(view, ctx)`` with a view holding only the observed tensors the attack
    ``requires`` and the public ``knowledge`` (``view.truth`` is empty), and an
    :class:`~dpkit.contract.context.AttackContext` (device, seeded generators — no dataset, model
    or ledger); then ``score(guesses, truth)`` with the private truth. See
    :func:`dpkit.contract.attacks.run_attack`.
    """

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    requires: ClassVar[tuple[str, ...]]
    params: BaseModel

    def run(self, view: ServerView, ctx: AttackContext) -> Any:
        """Attack ``view.observed`` using ``view.knowledge``; return the guesses."""

    def score(self, guesses: Any, truth: dict[str, Any]) -> dict[str, float]:
        """Score ``guesses`` against the private ``truth``; returns named finite metrics."""


@runtime_checkable
class DatasetSource(Protocol):
    """A dataset the runner can load; ``load`` returns a :class:`dpkit.data.TextDataset` or
    another dataset type documented by the plug-in (e.g. word pairs)."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    params: BaseModel

    def load(self) -> Any:
        """Fetch (cached) and return the dataset."""


@runtime_checkable
class ModelSource(Protocol):
    """A model the runner can load onto a device (an EmbeddingSpace, a split model, ...)."""

    name: ClassVar[str]
    Params: ClassVar[type[BaseModel]]
    params: BaseModel

    def load(self, device: torch.device) -> Any:
        """Fetch (cached) and return the model on ``device``."""


# ------------------------------------------------------------------ optional capabilities
# Each capability is a named protocol the runner, the planner or the auditor checks with
# ``isinstance`` (they are runtime-checkable); implement the method to opt in.


@runtime_checkable
class DeclaresReleases(Protocol):
    """A defense that declares everything it sends before running (required for plan = run).

    The runner calls ``releases(ctx)`` and declares them on ``ctx.wire`` (one ledger spend each)
    before ``run(ctx)``; ``dpkit budget spec`` calls the same method on the same data, so the
    planned entries are the run's entries. The instance may keep what it computed (e.g. the
    tokenized data) for ``run``.
    """

    def releases(self, ctx: RunContext) -> list[Release]:
        """Every :class:`dpkit.release.wire.Release` this run will send up, with counts from ``ctx``."""


@runtime_checkable
class PlansSpends(Protocol):
    """A component whose spends depend only on its params (e.g. DPED's (ε, δ) per query)."""

    def planned_spends(self, privacy: PrivacySettings) -> list[tuple[Guarantee, str, int]]:
        """``(guarantee, label, count)`` spends the run will record, given the spec's privacy."""


@runtime_checkable
class FitsCounts(Protocol):
    """A token mechanism that needs public word counts before running (e.g. CusText's output sets)."""

    def fit_counts(self, counts: torch.Tensor) -> None:
        """Receive ``[V]`` token counts of the (non-private) training split."""


@runtime_checkable
class AuditableDefense(Protocol):
    """A defense (or adapter) that inserts canaries into its own run and scores them
    (``dpkit audit --defense``; see :mod:`dpkit.audit.canary`)."""

    def audit_run(self, ctx: Any, included: Any) -> Any:
        """Run with the ``included`` canaries inserted; score all of them; claim ε per canary
        (returns a :class:`dpkit.audit.canary.CanaryRun`)."""


@runtime_checkable
class RunsMechanisms(Protocol):
    """A defense that runs any registered mechanism over a dataset and scores what it releases:
    the defense a spec's ``mechanism:`` cells run.

    It declares ``runs_mechanisms = True`` (and, registered lazily, the capability
    ``"runs_mechanisms"``); its ``Params`` take ``mechanism`` (the mechanism's name),
    ``mechanism_params`` and every setting of the spec's ``evaluation:`` block.
    """

    runs_mechanisms: bool


@runtime_checkable
class ReadsFiles(Protocol):
    """A dataset source whose ``path`` param names a local file or folder it reads, and which
    fingerprints its content (``content_fingerprint()``): ``dpkit budget cap FILE`` identifies a
    local file through it. It declares ``reads_files = True`` (and, registered lazily, the
    capability ``"reads_files"``)."""

    reads_files: bool


@runtime_checkable
class DxLaplaceNoise(Protocol):
    """An embedding mechanism whose output is each row plus multivariate Laplace dχ noise at its
    guarantee's η (the law of :func:`dpkit.sample_laplace_noise`), then clipped to the L2 ball of
    radius ``clip_bound`` (None: not clipped).

    The split-inference canary audit tests the uploads of a defense using such a mechanism
    against that law, clip included (:class:`dpkit.SplitCanaryAudit`).
    """

    @property
    def clip_bound(self) -> float | None:
        """The L2 norm every output row is clipped to, or None."""


@runtime_checkable
class ExactDensity(Protocol):
    """An embedding mechanism whose output density is computable (the auditor's exact path)."""

    def log_density(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``log p(y | x)`` per row."""


@runtime_checkable
class ExactOutputProbs(Protocol):
    """A token mechanism whose output law is computable (the auditor's exact path)."""

    def output_log_probs(self, ids: torch.Tensor, space: EmbeddingSpace) -> torch.Tensor:
        """``[n, V]`` log-probabilities of every output word for each input id."""


CAPABILITIES: dict[str, type] = {
    "audit_run": AuditableDefense,
    "releases": DeclaresReleases,
    "planned_spends": PlansSpends,
    "verbatim": ReleasesVerbatim,
    "sequence_level": SequenceLevel,
    "fit_counts": FitsCounts,
    "exact_density": ExactDensity,
    "exact_output_probs": ExactOutputProbs,
    "runs_mechanisms": RunsMechanisms,
    "reads_files": ReadsFiles,
    "dx_laplace_noise": DxLaplaceNoise,
}
"""Optional capabilities by name: what a component may implement beyond its kind's protocol."""

def protocol_members(protocol: type) -> set[str]:
    """The attributes and methods a capability protocol requires."""
    own = {n for n, v in vars(protocol).items() if not n.startswith("_")
           and (callable(v) or isinstance(v, (property, classmethod, staticmethod)))}
    return own | set(getattr(protocol, "__annotations__", {}))


def capabilities_of(cls: type) -> frozenset[str]:
    """The capability names a component class implements (its members, and a true marker)."""
    found = set()
    for name, protocol in CAPABILITIES.items():
        members = protocol_members(protocol)
        if all(hasattr(cls, m) for m in members) and all(
                getattr(cls, m) is not False for m in getattr(protocol, "__annotations__", {})):
            found.add(name)
    return frozenset(found)


PROTOCOLS: dict[str, type] = {
    "mechanism": Mechanism,
    "defense": Defense,
    "attack": Attack,
    "dataset": DatasetSource,
    "model": ModelSource,
}
