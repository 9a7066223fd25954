"""DPED, PATE and DP-SGD with the server in its own process: the student (the DP-SGD model) it
trains there is the one the in-process host trains, and the client's process never runs that
training."""

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


SGD = {**SMALL, "public_data": "dped_process_public", "topic_data": "dped_process_topics",
       "init": "public", "target_epsilon": 4.0, "steps_by_epsilon": {4.0: 8},
       "sampling_rate": 0.2, "pairs_per_doc": 8}
CASES = {"dped": (TINY, "student", "dpkit_dped.server.train_student"),
         "dped_pate": (TINY, "student", "dpkit_dped.server.train_student"),
         "dped_dpsgd": (SGD, "trained_model", "dpkit_dped.sgd_server.GradientServer.step")}


@pytest.mark.parametrize("name", list(CASES))
def test_what_a_server_process_trains_is_what_the_in_process_host_trains(registry, name, tmp_path,
                                                                         monkeypatch):
    params, request, server_code = CASES[name]
    results = {}
    for kind in ("inprocess", "process"):
        ctx = RunContext(dataset=tiny_dataset("tiny_private", 120, 30, seed=0), model=None,
                         device=torch.device("cpu"), seed=0, ledger=Ledger(1e-5),
                         registry=registry, cache_dir=tmp_path / "cache", connect=connector(kind))
        if kind == "process":  # the server's code never runs in the client's process
            monkeypatch.setattr(server_code, _refuse)
        result = registry.build("defense", name, params).run(ctx)
        arrived = tally(ctx.wire.channel())["messages"]
        ctx.wire.channel().close()
        results[kind] = {k: "nan" if isinstance(v, float) and math.isnan(v) else v
                         for k, v in result.metrics.items() if not k.endswith("_s")}
        assert arrived.get(request) == 1
        assert ("hidden_means" in arrived) == (name == "dped")
    assert results["process"] == results["inprocess"]
    assert math.isfinite(results["process"]["perplexity"])


def _refuse(*args, **kwargs):
    raise AssertionError("the student was trained in the client's process")
