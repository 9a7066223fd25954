"""Ray executor: same results as local, failures reported, resume, clear message without Ray."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from dpkit.runner.secret import FILE as SECRET_FILE
from dpkit.base.errors import DpkitError
from dpkit.runner import run_spec
from dpkit.spec import load_spec
from dpkit.contract.plugins import get_registry


def test_missing_ray_says_how_to_install(monkeypatch):
    from dpkit.runner import make_executor

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(DpkitError, match=r"pip install 'dpkit\[ray\]'"):
        make_executor("ray", registry=get_registry())


@pytest.fixture(scope="module")
def ray_session():
    """One local 2-CPU Ray for the module; workers load only the toy plug-in."""
    pytest.importorskip("ray")
    from dpkit.testing.boundary import local_ray

    with local_ray("toy=dpkit.testing.toy") as ray:
        yield ray


@pytest.fixture
def ray_toy(ray_session, toy_plugins):
    return ray_session


def test_ray_matches_local_and_resumes(ray_toy, toy_spec_text, tmp_path):
    path, _ = toy_spec_text
    spec = load_spec(path, registry=get_registry())
    local = run_spec(spec, tmp_path / "local", show_progress=False, registry=get_registry())
    (tmp_path / "ray").mkdir()  # the same noise secret: the same draws
    shutil.copy(tmp_path / "local" / SECRET_FILE, tmp_path / "ray" / SECRET_FILE)
    remote = run_spec(spec, tmp_path / "ray", executor="ray", show_progress=False,
                      registry=get_registry())
    assert remote.ran == 3 and not remote.failures
    by_key = {r.key: r.metrics for r in local.rows}
    assert {r.key: r.metrics for r in remote.rows} == by_key
    # drop one finished cell: the next Ray run recomputes only that one
    lines = (tmp_path / "ray" / "results.jsonl").read_text().splitlines()
    (tmp_path / "ray" / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    again = run_spec(spec, tmp_path / "ray", executor="ray", show_progress=False, registry=get_registry())
    assert again.ran == 1 and again.skipped == 2
    rows = [json.loads(x) for x in (tmp_path / "ray" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 3


def test_ray_failed_cell_is_retried_then_reported(ray_toy, tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text(f"""
name: f
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise, params: {{eta: 1.0}}, sweep: {{fail: [false, true, false]}}}}
device: cpu
output: {tmp_path / 'out'}
""")
    outcome = run_spec(load_spec(path, registry=get_registry()), executor="ray", retries=1,
                       show_progress=False, registry=get_registry())
    assert outcome.ran == 1  # the two 'fail: false' cells share a key: one cell
    assert len(outcome.failures) == 1 and "asked to fail" in outcome.failures[0][1]
