"""Declare first, settle after: every release of a defense is on the ledger before it runs
(once, however often it is declared), and nothing crosses the wire once the run is settled."""

from __future__ import annotations

import dp_accounting
import pytest
import torch

from dpkit.accounting import DpGuarantee, Ledger
from dpkit.base.errors import AccountingError
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry
from dpkit.contract.protocols import DefenseResult
from dpkit.contract.releases import declare_releases, run_defense, settle
from dpkit.contract.server import STANDARD_PHASES
from dpkit.release.codec import decode, encode
from dpkit.release.wire import Release


class EchoNothing:
    """A server that keeps nothing and answers nothing (the bytes still cross), and takes the
    standard phases and the releases these tests send."""

    def request(self, data: bytes) -> bytes:
        if decode(data).get("op") == "labels":
            return encode({"phases": list(STANDARD_PHASES), "handlers": [],
                           "releases": ["mean", "median"]})
        return encode(None)

    def close(self) -> None:
        pass


def _ctx() -> RunContext:
    return RunContext(dataset=["a", "b", "c"], model=None, device=torch.device("cpu"), seed=0,
                      ledger=Ledger(), registry=get_registry(),
                      connect=lambda defense, ctx: EchoNothing())


class Mean:
    """Declares one Gaussian release and sends it; records what the ledger held when it ran."""

    def __init__(self, wire_bytes: dict[str, int] | None = None, name: str = "mean"):
        self.wire_bytes, self.name = dict(wire_bytes or {}), name
        self.spends_at_run: int | None = None

    def releases(self, ctx: RunContext) -> list[Release]:
        """One release per row of the cell's data."""
        return [Release(self.name, DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), self.name,
                        count=len(ctx.dataset))]

    def run(self, ctx: RunContext) -> DefenseResult:
        self.spends_at_run = len(ctx.ledger.spends)
        ctx.wire.send(self.name, torch.zeros(1, 4))
        return DefenseResult({"norm": 0.0}, wire_bytes=self.wire_bytes)


class Undeclaring(Mean):
    """Spends inside run() only: nothing to declare (no ``releases``)."""

    releases = None  # type: ignore[assignment]


def test_releases_are_spent_once_per_defense_however_often_declared():
    ctx, defense = _ctx(), Mean()
    spends = declare_releases(defense, ctx)
    assert [(s.label, s.count) for s in spends] == [("mean", 3)]  # counted on the cell's data
    assert list(ctx.ledger.spends) == spends
    assert declare_releases(defense, ctx) == []  # the runner, then run() itself: one spend
    assert len(ctx.ledger.spends) == 1
    other = declare_releases(Mean(name="median"), ctx)  # another component of the cell declares its own
    assert len(other) == 1 and len(ctx.ledger.spends) == 2


def test_a_defense_that_declares_nothing_spends_nothing_but_still_reaches_its_server():
    ctx, defense = _ctx(), Undeclaring()
    assert declare_releases(defense, ctx) == []
    assert len(ctx.ledger.spends) == 0 and not ctx.declared
    ctx.wire.declare(Mean().releases(ctx))
    ctx.wire.send("mean", torch.zeros(1, 4))  # the wire connected: the server was bound
    assert ctx.wire.bytes() > 0


def test_run_defense_declares_before_running_and_closes_the_wire_after():
    ctx, defense = _ctx(), Mean()
    result = run_defense(defense, ctx)
    assert defense.spends_at_run == 1  # charged before anything could cross
    assert len(ctx.ledger.spends) == 1  # run() declaring again would not charge twice
    assert result.wire_bytes == ctx.wire.summary() and result.wire_bytes["total"] > 0
    with pytest.raises(AccountingError, match="the wire is closed; 'mean' was sent after the run"):
        ctx.wire.send("mean", torch.zeros(1, 4))


def test_settle_keeps_the_byte_counts_a_defense_reported_itself():
    ctx = _ctx()
    own = {"total": 7}
    result = settle(DefenseResult({}, wire_bytes=own), ctx)
    assert result.wire_bytes == own
    with pytest.raises(AccountingError, match="the wire is closed"):
        ctx.wire.send("anything", None)
