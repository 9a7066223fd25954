"""RunContext.prepared: per-run state held by the framework, built once per owner and cell."""

from __future__ import annotations

import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry


def _ctx() -> RunContext:
    return RunContext(dataset=None, model=None, device=torch.device("cpu"), seed=0,
                      ledger=Ledger(), registry=get_registry())


def test_built_once_per_owner_and_run():
    ctx, calls = _ctx(), []
    first, second = object(), object()
    build = lambda tag: (lambda: calls.append(tag) or tag)  # noqa: E731
    assert ctx.prepared(first, build("a")) == "a"
    assert ctx.prepared(first, build("again")) == "a"
    assert ctx.prepared(second, build("b")) == "b"
    assert calls == ["a", "b"]
    assert _ctx().prepared(first, build("c")) == "c"  # another cell prepares afresh
