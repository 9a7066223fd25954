"""Run one cell: load data and model, build the defense, run it and the attacks."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable

import numpy as np
import torch

from dpkit.base.results import CellResult
from dpkit.contract.attacks import run_attack
from dpkit.contract.context import derive_seed, resolve_device
from dpkit.contract.registry import Registry
from dpkit.runner.cell import open_cell, settle
from dpkit.runner.plan_check import EQUAL, NOT_PLANNED, check_plan
from dpkit.spec import Cell

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch global generators for components that use them."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def execute_cell(cell: Cell, registry: Registry,
                 progress: Callable[[str], None] | None = None) -> CellResult:
    """Run ``cell`` and return its result (metrics, privacy summary, ledger, bytes, timing)."""
    started = time.perf_counter()
    device = resolve_device(cell.device)
    seed_everything(derive_seed(cell.seed, "global", cell.key))
    opened = open_cell(cell, registry, device, progress=progress)
    ctx, ledger = opened.ctx, opened.ledger
    assert ctx is not None  # only a plan leaves the context unbuilt
    declared = len(ledger.spends)
    result = settle(opened.defense.run(ctx), ctx)
    plan = check_plan(opened.defense, ctx.privacy, ledger, declared)
    if plan not in (EQUAL, NOT_PLANNED):
        log.warning("cell %s: the run's ledger %s (dpkit budget spec under-stated it)",
                    cell.key, plan)
        ctx.say(f"WARNING: the run's ledger {plan}")
    metrics = {k: float(v) for k, v in result.metrics.items()}
    skipped = []
    for ref in cell.attacks:
        attack = registry.build("attack", ref["name"], ref["params"])
        view = result.view
        if view is None or not all(r in view.observed for r in attack.requires):
            skipped.append(ref["name"])
            continue
        metrics.update(run_attack(attack, view, ctx))
    return CellResult(
        key=cell.key,
        spec=cell.spec_name,
        method=cell.method,
        kind=cell.kind,
        component=cell.component,
        params=cell.params,
        point=cell.point,
        seed=cell.seed,
        data=cell.data,
        metrics=metrics,
        privacy=ledger.summary(),
        ledger=ledger.to_dict(),
        plan=plan,
        wire_bytes=dict(result.wire_bytes),
        training_curves=list(result.training_curves),
        attacks_skipped=skipped,
        device=str(device),
        elapsed_s=round(time.perf_counter() - started, 3),
    )

