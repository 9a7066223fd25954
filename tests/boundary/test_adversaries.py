"""Ways to put the raw token embeddings where the attacks look, tried against the whole runner.

Each ``leak_*`` defense of :mod:`dpkit.testing.adversaries` sends its honest, noisy rows (a finite
ledger entry) and then tries one way around the boundary; the ``leak_probe`` attack, run where
the server is, searches the server's view, its knowledge and every tensor in the server process
for the private sequence of raw vectors. Property: every attempt fails with a clear error, or
ends with ε = ∞ on the ledger, or the probe finds nothing. The control at the end runs the honest
defense with the server in the client's process (no boundary): there the probe finds the raw rows,
so a zero elsewhere is the boundary's doing, not a blind probe.
"""

from __future__ import annotations

import json
import math
import os

import pytest
import torch

import dpkit.contract.plugins
from dpkit.contract.server import Message
from dpkit.testing.boundary import toy_rows as _run
from dpkit.testing.wire_tricks import ENVIRONMENT_VARIABLE

LEAKS = ["leak_alias", "leak_count_zero", "leak_padding", "leak_companion", "leak_rows_mask",
         "leak_reply", "leak_truth", "leak_global", "leak_swap_wire", "leak_own_wire",
         "leak_raw_pipe", "leak_public_model", "leak_private_data", "leak_name"]
EXPECTED_ERROR = {"leak_rows_mask": "rows", "leak_reply": "reply", "leak_swap_wire": "runner",
                  "leak_private_data": "shares", "leak_name": "no handler",
                  "leak_companion": "is not one the server takes"}
EXPECTED_INFINITE = {"leak_count_zero", "leak_padding", "leak_own_wire", "leak_raw_pipe"}


def test_every_way_around_the_boundary_is_refused_or_charged(tmp_path, leak_plugins):
    rows = _run(tmp_path, "leaks", ["toy_noise", *LEAKS])
    honest = rows["toy_noise"]
    assert math.isfinite(honest["privacy"]["epsilon"]) and honest["metrics"]["raw_found"] == 0.0
    for leak in LEAKS:
        row = rows[leak]
        if leak in EXPECTED_ERROR:
            assert "error" in row and EXPECTED_ERROR[leak] in row["error"], (leak, row)
            continue
        assert "error" not in row, (leak, row)
        infinite = row["privacy"]["epsilon"] == math.inf
        assert infinite == (leak in EXPECTED_INFINITE), (leak, row["ledger"])
        if not infinite:
            assert row["metrics"]["raw_found"] == 0.0, (leak, row["metrics"])


def test_a_server_cannot_pass_what_it_saw_to_a_later_cell(tmp_path, leak_plugins):
    first = _run(tmp_path, "stash1", ["leak_server_stash"], "{sleep: 0.001}")
    clean = first["leak_server_stash"]
    assert clean["privacy"]["epsilon"] == math.inf and clean["metrics"]["raw_found"] == 1.0
    later = _run(tmp_path, "stash2", ["toy_noise"])["toy_noise"]
    assert later["metrics"]["raw_found"] == 0.0


def test_control_without_the_boundary_the_probe_finds_the_raw_rows(tmp_path, leak_plugins,
                                                                    monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER", "inprocess")
    row = _run(tmp_path, "control", ["leak_truth"])["leak_truth"]  # the raw rows live on here
    assert math.isfinite(row["privacy"]["epsilon"]) and row["metrics"]["raw_found"] == 1.0


def test_the_ledger_names_what_crossed_outside_the_wire(tmp_path, leak_plugins):
    rows = _run(tmp_path, "outside", ["leak_raw_pipe"])
    reasons = json.dumps(rows["leak_raw_pipe"]["ledger"])
    assert "outside ctx.wire" in reasons


@pytest.fixture
def trick_plugins(leak_plugins, monkeypatch):
    """The adversaries' plug-ins and the wire tricks."""
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", os.environ["DPKIT_EXTRA_PLUGINS"]
                       + ",tricks=dpkit.testing.wire_tricks")
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    dpkit.contract.plugins.reset()


def test_a_patched_channel_end_neither_hides_a_message_nor_adds_one(tmp_path, trick_plugins):
    rows = _run(tmp_path, "patched", ["trick_patched_tally", "trick_before_attack"])
    hidden = rows["trick_patched_tally"]  # the runner's tally is its own: the extra message shows
    assert "error" not in hidden and hidden["privacy"]["epsilon"] == math.inf, hidden
    assert "outside ctx.wire" in json.dumps(hidden["ledger"])
    added = rows["trick_before_attack"]  # no raw rows reach the attack
    assert "error" not in added and math.isfinite(added["privacy"]["epsilon"]), added
    assert added["metrics"]["raw_found"] == 0.0


def test_a_thread_left_behind_gets_nothing_past_the_final_tally(tmp_path, trick_plugins):
    row = _run(tmp_path, "late", ["trick_late_thread"])["trick_late_thread"]
    assert "error" not in row, row
    assert row["privacy"]["epsilon"] == math.inf or row["metrics"]["raw_found"] == 0.0, row


def test_the_clients_environment_does_not_reach_its_server(tmp_path, trick_plugins):
    rows = _run(tmp_path, "environ", ["trick_environ", "toy_noise"])
    for method in ("trick_environ", "toy_noise"):  # the second cell's server comes after it
        assert math.isfinite(rows[method]["privacy"]["epsilon"]), rows[method]
        assert rows[method]["metrics"]["raw_found"] == 0.0, rows[method]


def test_the_ledgers_settings_stay_the_runners(tmp_path, trick_plugins):
    rows = _run(tmp_path, "settings", ["trick_ledger_settings", "toy_noise"])
    tricked, honest = rows["trick_ledger_settings"], rows["toy_noise"]  # the same release
    assert "error" not in tricked, tricked
    assert tricked["privacy"]["delta"] == honest["privacy"]["delta"]
    assert tricked["privacy"]["epsilon"] == honest["privacy"]["epsilon"]
    assert tricked["ledger"] == honest["ledger"]


def test_a_cell_that_fails_half_way_is_charged_what_crossed_outside_the_wire(tmp_path,
                                                                              trick_plugins):
    """Adversarial: raw rows past the meter, then a crash before the runner's cross-check; the
    ledger the caller keeps for the budget store must still say ∞."""
    from dpkit.accounting import Ledger
    from dpkit.contract.plugins import get_registry
    from dpkit.runner.execute import execute_cell
    from dpkit.spec import load_spec
    from dpkit.spec.cells import expand

    path = tmp_path / "crash.yaml"
    path.write_text(f"""name: crash
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: trick_crash_after_raw}}
seeds: [0]
device: cpu
output: {tmp_path / "crash"}
""")
    registry = get_registry()
    [cell] = expand(load_spec(path, registry=registry), registry)
    kept = Ledger()
    with pytest.raises(RuntimeError, match="a crash half-way"):
        execute_cell(cell, registry, ledger=kept, noise_secret="s")
    assert kept.epsilon() == math.inf
    assert "outside ctx.wire" in json.dumps(kept.to_dict())


def test_labels_a_client_makes_up_do_not_cross(tmp_path, trick_plugins):
    """Adversarial: the raw rows spelled in a phase, and in how many batches end between
    requests. The phase is refused before it crosses; the batch number is the server's own
    count, so it spells nothing. (The widths of empty tensors, ``trick_empty_shape``: see
    test_shape_adversaries.py.)"""
    rows = _run(tmp_path, "labels", ["trick_phase", "trick_batch_count"])
    assert "error" in rows["trick_phase"] and "is not one the server takes" in \
        rows["trick_phase"]["error"], rows["trick_phase"]
    counted = rows["trick_batch_count"]
    assert "error" not in counted and math.isfinite(counted["privacy"]["epsilon"]), counted
    assert counted["metrics"]["raw_found"] == 0.0, counted["metrics"]


def test_control_the_trick_server_reads_what_the_labels_would_spell():
    """Without the wire's checks (messages made by hand), the tricks' server does recover the
    raw rows from phases, batch gaps and empty widths: the refusals and the zero are the
    wire's doing."""
    from dpkit.testing.wire_tricks import SPELLED_ROWS, TrickServer

    class Public:
        model = type("Space", (), {"vectors": torch.zeros(5, 8)})()

    raw = torch.randn(SPELLED_ROWS, 8)
    server = TrickServer(None, Public())
    server.receive(Message("probe_request", "raw_" + raw.numpy().tobytes().hex(), 0, None))
    batch = 0  # the client's count of ended batches, as the message once carried it
    for byte in raw.numpy().tobytes():
        batch += byte
        server.receive(Message("probe_batch", "run", batch, None))
    for word in raw.view(torch.int32).reshape(-1).tolist():
        server.receive(Message("embeddings", "run", 0, torch.empty(0, word % 2 ** 32)))
    server.receive(Message("probe_request", "run", 0, None))
    for key in ("phase", "batches", "widths"):
        assert torch.equal(server.observed[key], raw), key
