"""DPED and PATE with the server in its own process: the student it trains there is the one the
in-process host trains, and the client's process never runs the student's training."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

import dpkit.contract.plugins
from dpkit.accounting import Ledger
from dpkit.boundary.session import connector, tally
from dpkit.contract.context import RunContext

from .conftest import SMALL, tiny_dataset

HERE = Path(__file__).parent / "process"
TINY = {**SMALL, "public_data": "dped_process_public", "topic_data": "dped_process_topics",
        "teachers": 4, "num_queries": 24, "student_epochs": 3, "threshold_votes": 0.05,
        "noiseless": True}


@pytest.fixture
def registry():
    """The installed plug-ins plus the tiny corpora, importable by a server process by name."""
    sys.path.insert(0, str(HERE))
    system = dpkit.contract.plugins.get_plugin_system()
    added = "dped_process" not in system.info
    if added:
        import dped_tiny_corpora

        dpkit.contract.plugins.register_plugin(dped_tiny_corpora, "dped_process")
    yield system.registry
    if added:
        system.remove("dped_process")
    sys.path.remove(str(HERE))


@pytest.mark.parametrize("name", ["dped", "dped_pate"])
def test_the_student_from_a_server_process_is_the_in_process_one(registry, name, tmp_path,
                                                                  monkeypatch):
    import dpkit_dped.student

    results = {}
    for kind in ("inprocess", "process"):
        ctx = RunContext(dataset=tiny_dataset("tiny_private", 120, 30, seed=0), model=None,
                         device=torch.device("cpu"), seed=0, ledger=Ledger(1e-5),
                         registry=registry, cache_dir=tmp_path / "cache", connect=connector(kind))
        if kind == "process":  # the client may not train a student itself
            monkeypatch.setattr(dpkit_dped.student, "train_student", _refuse)
            monkeypatch.setattr("dpkit_dped.server.train_student", _refuse)
        result = registry.build("defense", name, TINY).run(ctx)
        arrived = tally(ctx.wire.channel())["messages"]
        ctx.wire.channel().close()
        results[kind] = {k: "nan" if isinstance(v, float) and math.isnan(v) else v
                         for k, v in result.metrics.items() if not k.endswith("_s")}
        assert arrived.get("student") == 1 and arrived.get("threshold") == 1
        assert ("hidden_means" in arrived) == (name == "dped")
    assert results["process"] == results["inprocess"]
    assert math.isfinite(results["process"]["perplexity"])


def _refuse(*args, **kwargs):
    raise AssertionError("the student was trained in the client's process")
