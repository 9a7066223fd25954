"""Run one cell: load data and model, build the defense, run its client here and its server and
the attacks in the server's own process, score the attacks' guesses here."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.base.results import CellResult
from dpkit.boundary.session import (close_soon, connector, cross_check, remote_attack,
                                    server_description)
from dpkit.contract.context import derive_seed, resolve_device
from dpkit.contract.registry import Registry
from dpkit.release.codec import to_device
from dpkit.runner.cell import open_cell, settle
from dpkit.runner.plan_check import EQUAL, NOT_PLANNED, check_plan
from dpkit.spec import Cell

log = logging.getLogger(__name__)


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch global generators for components that use them."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _check_after_failure(channel: Any, wire: Any) -> None:
    """A failed run's cross-check: what reached the server outside the wire is charged ∞ on the
    cell's ledger (kept by the caller), and a server that cannot say what arrived is too."""
    if channel is None:
        return
    try:
        cross_check(channel, wire)
    except Exception as exc:  # noqa: BLE001 - the run's own error is the one raised
        try:
            wire.ledger.spend(NoGuarantee(
                f"the cell failed and its server could not say what arrived "
                f"({type(exc).__name__}: {exc}); what crossed outside ctx.wire is unknown"),
                "unknown (cell failed)")
        except Exception:  # noqa: BLE001 - a cap refusing it: the run's error still goes up
            pass


def execute_cell(cell: Cell, registry: Registry, progress: Callable[[str], None] | None = None,
                 ledger=None, noise_secret: str | None = None,
                 server: str | None = None) -> CellResult:
    """Run ``cell`` and return its result (metrics, privacy summary, ledger, bytes, timing).

    ``ledger`` (default: a fresh one from the cell's privacy settings) lets the caller keep what
    was charged even when the cell fails part-way; ``noise_secret`` (the run's, see
    :func:`dpkit.runner.secret.noise_secret`) seeds the release noise the server cannot guess;
    ``server`` is where the defense's server runs (:func:`dpkit.boundary.session.connector`).
    """
    started = time.perf_counter()
    device = resolve_device(cell.device)
    seed_everything(derive_seed(cell.seed, "global", cell.key))
    connect = connector(server)
    opened = open_cell(cell, registry, device, progress=progress, ledger=ledger,
                       connect=connect, noise_secret=noise_secret)
    ctx, ledger = opened.ctx, opened.ledger
    assert ctx is not None  # only a plan leaves the context unbuilt
    wire = ctx.wire  # the runner's own wire: what the plug-in does to ctx cannot change it
    declared = len(ledger.spends)
    if wire.releases:  # it will send: its server builds while the client works
        connect.start(opened.defense, ctx)
    try:
        try:
            result = settle(opened.defense.run(ctx), ctx)
        except BaseException:
            _check_after_failure(connect.channel, wire)  # what crossed is charged all the same
            raise
        channel = connect.channel  # the runner's own: the wire (and the plug-in) hold an end of it
        if channel is not None:
            cross_check(channel, wire)
        plan = check_plan(opened.defense, ctx.privacy, ledger, declared)
        if plan not in (EQUAL, NOT_PLANNED):
            log.warning("cell %s: the run's ledger %s (dpkit budget spec under-stated it)",
                        cell.key, plan)
            ctx.say(f"WARNING: the run's ledger {plan}")
        metrics = {k: float(v) for k, v in result.metrics.items()}
        where = server_description(channel)
        skipped = []
        for ref in cell.attacks:
            out = (remote_attack(channel, ref["name"], ref["params"],
                                 derive_seed(cell.seed, "attack"))
                   if channel is not None else {"skipped": "nothing crossed the wire"})
            if "skipped" in out:
                skipped.append(ref["name"])
                continue
            attack = registry.build("attack", ref["name"], ref["params"])
            metrics.update({k: float(v) for k, v in
                            attack.score(out["guesses"], to_device(dict(result.truth), "cpu")).items()})
    finally:
        if connect.channel is not None:
            close_soon(connect.channel)  # it exits while the next cell starts
        connect.discard()
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
        server=where,
        elapsed_s=round(time.perf_counter() - started, 3),
    )
