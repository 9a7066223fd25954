"""Attacks see only what the server kept: no truth, no dataset, no ledger (the end-to-end cases,
with the attack in the server's process, are in tests/boundary/)."""

from __future__ import annotations

import torch

from dpkit.accounting import Ledger
from dpkit.contract.attacks import attack_view, run_attack
from dpkit.contract.context import AttackContext, RunContext
from dpkit.contract.plugins import get_registry
from dpkit.release.view import ServerView


class Snoop:
    """Records what its run() was given."""

    name, requires = "snoop", ("embeddings",)

    def run(self, view, ctx):
        self.seen = (view, ctx)
        return view.observed["embeddings"].sum()

    def score(self, guesses, truth):
        return {"error": float((guesses - truth["total"]).abs())}


def _ctx(dataset=None) -> RunContext:
    return RunContext(dataset=dataset, model=None, device=torch.device("cpu"), seed=3,
                      ledger=Ledger(), registry=get_registry())


def test_run_gets_no_truth_and_no_run_context():
    view = ServerView(observed={"embeddings": torch.ones(3), "clean": torch.zeros(3)},
                      knowledge={"space": "public"}, truth={"total": 3.0})
    attack = Snoop()
    assert run_attack(attack, view, _ctx()) == {"error": 0.0}
    seen_view, seen_ctx = attack.seen
    assert seen_view.truth == {} and set(seen_view.observed) == {"embeddings"}
    assert isinstance(seen_ctx, AttackContext) and seen_ctx.seed == 3
    assert not any(hasattr(seen_ctx, name) for name in ("dataset", "ledger", "model", "registry"))
    assert attack_view(view, ("clean",)).observed.keys() == {"clean"}
