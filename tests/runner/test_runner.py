"""Runner: results, resume, --fresh, determinism, failures, interruption, outputs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.runner import run_spec
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry


def read_rows(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_run_writes_every_output(toy_spec_text, toy_plugins):
    path, out = toy_spec_text
    outcome = run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert outcome.ran == 3 and not outcome.failures
    rows = read_rows(out)
    assert [r["params"]["eta"] for r in rows] == [0.5, 2.0, 8.0]
    for name in ("results.csv", "ledger.json", "tradeoff.png"):
        assert (out / name).stat().st_size > 0
    ledger = json.loads((out / "ledger.json").read_text())["cells"]
    assert set(ledger) == {r["key"] for r in rows}
    # Gaussian noise is declared (ε, δ)-DP, never η-dχ; less noise (larger η) costs more ε
    for r in rows:
        assert "eta" not in r["privacy"] and r["ledger"]["spends"][0]["count"] > 1
    eps = [r["privacy"]["epsilon"] for r in rows]
    assert 0 < eps[0] < eps[1] < eps[2] < float("inf")
    # less noise -> more tokens survive, and the attack recovers more
    pres = [r["metrics"]["preserved"] for r in rows]
    assert pres[0] < pres[2]
    assert "toy_top1" in rows[0]["metrics"]


def test_resume_skips_finished_cells_and_fresh_redoes(toy_spec_text, toy_plugins):
    path, out = toy_spec_text
    spec = load_spec(path, registry=get_registry())
    first = run_spec(spec, show_progress=False, registry=get_registry())
    second = run_spec(spec, show_progress=False, registry=get_registry())
    assert second.ran == 0 and second.skipped == 3
    assert len(read_rows(out)) == 3
    secret = (out / SECRET_FILE).read_text()
    third = run_spec(spec, show_progress=False, fresh=True, registry=get_registry())
    assert third.ran == 3 and len(read_rows(out)) == 3
    assert (out / SECRET_FILE).read_text() != secret  # --fresh draws anew: a new noise secret
    assert [r.key for r in first.rows] == [r.key for r in third.rows]


def test_same_seed_same_metrics(toy_spec_text, toy_plugins, tmp_path):
    path, _ = toy_spec_text
    registry = get_registry()
    a = run_spec(load_spec(path, registry=registry), tmp_path / "a", show_progress=False,
                 registry=registry).rows
    (tmp_path / "b").mkdir()  # same seed and same noise secret: the same draws
    shutil.copy(tmp_path / "a" / SECRET_FILE, tmp_path / "b" / SECRET_FILE)
    b = run_spec(load_spec(path, registry=registry), tmp_path / "b", show_progress=False,
                 registry=registry).rows
    assert [r.metrics for r in a] == [r.metrics for r in b]
    c = run_spec(load_spec(path, registry=registry), tmp_path / "c", show_progress=False,
                 registry=registry).rows  # a secret of its own: other draws
    assert [r.metrics for r in a] != [r.metrics for r in c]


def test_torn_last_line_is_rerun(toy_spec_text, toy_plugins):
    path, out = toy_spec_text
    run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:40])
    again = run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert again.ran == 1


def test_failed_cell_is_reported_and_others_finish(tmp_path, toy_plugins):
    path = tmp_path / "f.yaml"
    path.write_text(f"""
name: f
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise, params: {{eta: 1.0}}, sweep: {{fail: [false, true]}}}}
device: cpu
output: {tmp_path / 'out'}
""")
    outcome = run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert outcome.ran == 1 and len(outcome.failures) == 1
    assert "asked to fail" in outcome.failures[0][1]
    assert (tmp_path / "out" / "failures.jsonl").exists()


def test_sigint_stops_after_cell_in_flight_then_resumes(tmp_path):
    spec = tmp_path / "slow.yaml"
    out = tmp_path / "out"
    spec.write_text(f"""
name: slow
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise, params: {{sleep: 1.5}}, sweep: {{eta: [1, 2, 3, 4, 5, 6]}}}}
device: cpu
output: {out}
""")
    env = {**os.environ, "DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
    cmd = [sys.executable, "-m", "dpkit.cli.main", "run", str(spec), "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not (out / "results.jsonl").exists():
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    done = len(read_rows(out))
    assert 1 <= done < 6
    resumed = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - done} run now, {done} resumed" in resumed.stdout
    assert len(read_rows(out)) == 6


def test_a_reference_that_cannot_be_measured_never_costs_the_outputs(toy_spec_text, toy_plugins,
                                                                     monkeypatch, capsys):
    import dpkit.report.reference

    def broken(*args, **kwargs):
        raise RuntimeError("no labels today")

    monkeypatch.setattr(dpkit.report.reference, "measure_reference", broken)
    path, out = toy_spec_text
    outcome = run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert outcome.ran == 3 and outcome.reference is None
    assert (out / "results.csv").exists() and not (out / "reference.json").exists()
    assert "reference.json not written (RuntimeError: no labels today)" in capsys.readouterr().err
