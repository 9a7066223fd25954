"""One cell's lifecycle: build its context, declare its releases, run, settle.

:func:`open_cell` is everything a run does before the defense's ``run``: it builds the cell's
ledger and :class:`~dpkit.contract.context.RunContext` and declares the defense's releases on the
wire. A run (:func:`dpkit.runner.execute.execute_cell`) then calls ``run`` and :func:`settle`;
a plan (``dpkit budget spec``, :func:`dpkit.runner.plan.plan_spec`) reads the ledger of the very
same opened cell without running — so plan = run by construction, not by a second code path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from dpkit.accounting.ledger import Ledger, active_guard
from dpkit.base.cache import cache_root
from dpkit.contract.context import RunContext, load_component
from dpkit.contract.protocols import DeclaresReleases, PlansSpends
from dpkit.contract.registry import Registry
from dpkit.contract.releases import declare_releases, run_defense, settle  # noqa: F401 (re-exported)
from dpkit.contract.tasks import mechanism_task, mechanism_task_params

def defense_for(cell: Any, registry: Registry) -> Any:
    """The defense a cell runs: the named one, or the spec's mechanism task around a mechanism."""
    if cell.kind == "mechanism":
        params = mechanism_task_params(cell.component, cell.params, cell.evaluation)
        return registry.build("defense", mechanism_task(registry).name, params)
    return registry.build("defense", cell.component, cell.params)


def ledger_for(privacy: Any) -> Ledger:
    """A fresh ledger with a spec's privacy settings (δ, accountant, ceiling, neighbouring)."""
    return Ledger(delta=privacy.delta, accountant=privacy.accountant,
                  ceiling=getattr(privacy, "ceiling", None),
                  neighboring=getattr(privacy, "neighboring", "add_remove"))


@dataclass
class OpenCell:
    """A cell ready to run: its defense, and a context whose releases are already declared.

    ``ctx`` is None only for a plan of a defense that needs no data to state its spends.
    """

    defense: Any
    ctx: RunContext | None
    ledger: Ledger


def cell_context(cell: Any, registry: Any, device: torch.device, ledger: Ledger,
                 progress: Callable[[str], None] | None = None,
                 connect: Callable[[Any, RunContext], Any] | None = None,
                 noise_secret: str | None = None) -> RunContext:
    """The :class:`RunContext` of ``cell``: its data and model (cached per process) on ``device``;
    ``connect`` starts the defense's server on the first send (none: the cell cannot send)."""
    from dpkit.spec import PrivacySettings

    dataset = load_component(registry, "dataset", cell.data["name"], cell.data["params"], device)
    model = (load_component(registry, "model", cell.model["name"], cell.model["params"], device)
             if cell.model else None)
    return RunContext(dataset=dataset, model=model, device=device, seed=cell.seed, ledger=ledger,
                      registry=registry, cache_dir=cache_root() / "artifacts",
                      options={"cell": cell.key}, progress=progress,
                      privacy=PrivacySettings.model_validate(cell.privacy),
                      model_ref=dict(cell.model) if cell.model else None,
                      dataset_ref=dict(cell.data), connect=connect, noise_secret=noise_secret)


COMMON_NOISE_REASON = (
    "privacy.common_noise: this cell draws its release noise from the same stream as the spec's "
    "other cells at its seed (paired draws); released together, two such cells can reveal the "
    "data exactly (x = (η₁y₁ − η₂y₂)/(η₁ − η₂) for one draw at two η), so no finite ε covers "
    "the spec's releases; set common_noise: false for independent draws")


def framework_spends(privacy: Any) -> list[tuple[Any, str, int]]:
    """Entries the runner records on every cell of a spec before its releases: the ∞ of common
    noise across cells (``privacy.common_noise``); none otherwise."""
    if not getattr(privacy, "common_noise", False):
        return []
    from dpkit.accounting import NoGuarantee

    return [(NoGuarantee(COMMON_NOISE_REASON), "noise shared with the spec's other cells", 1)]


def cell_noise_secret(run_secret: str | None, cell: Any, privacy: Any) -> str | None:
    """The secret a cell's release noise is drawn with: the run's, joined with the cell's key so
    that no two cells share draws (the run's alone under ``privacy.common_noise``)."""
    if run_secret is None or getattr(privacy, "common_noise", False):
        return run_secret
    return f"{run_secret}/{cell.key}"


def open_cell(cell: Any, registry: Any, device: torch.device, *, planning: bool = False,
              progress: Callable[[str], None] | None = None,
              ledger: Ledger | None = None,
              connect: Callable[[Any, RunContext], Any] | None = None,
              noise_secret: str | None = None) -> OpenCell:
    """Build ``cell``'s defense, ledger and context, and declare the defense's releases.

    With ``planning``, a defense that states its spends from its params alone
    (:class:`~dpkit.contract.protocols.PlansSpends`) records them without loading any data, even
    when it also declares releases (DPED's family): its plan is then a second statement, which
    :mod:`dpkit.runner.plan_check` compares with what each run recorded.
    ``ledger`` (default: a fresh one from the cell's privacy settings) lets a caller read what
    was recorded even when a ceiling refuses a spend part-way.
    """
    from dpkit.spec import PrivacySettings

    privacy = PrivacySettings.model_validate(cell.privacy)
    ledger = ledger if ledger is not None else ledger_for(privacy)
    if not planning and ledger.guard is None:
        ledger.guard = active_guard()  # the runner's budget guard: charged before it is recorded
    for guarantee, label, count in framework_spends(privacy):
        ledger.spend(guarantee, label, count)
    defense = defense_for(cell, registry)
    if planning and (isinstance(defense, PlansSpends) or not isinstance(defense, DeclaresReleases)):
        if isinstance(defense, PlansSpends):
            for guarantee, label, count in defense.planned_spends(privacy):
                ledger.spend(guarantee, label, count)
        return OpenCell(defense, None, ledger)
    ctx = cell_context(cell, registry, device, ledger, progress, None if planning else connect,
                       cell_noise_secret(noise_secret, cell, privacy))
    declare_releases(defense, ctx)
    return OpenCell(defense, ctx, ledger)
