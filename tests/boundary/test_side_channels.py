"""Routes around the process boundary (files, the client's memory, the run's secret), tried
against the whole runner: a confined server fails each with a clear error; with confinement off
each one works, so the refusals are the confinement's doing."""

from __future__ import annotations

import math
import sys

import pytest

import dpkit.contract.plugins
from dpkit.testing.boundary import rows_by_method
from dpkit.boundary.confine import landlock_abi
from dpkit.testing.side_channels import KNOWN_SECRET, client_memory_readable_unconfined

SIDE_CHANNELS = ["leak_file", "leak_client_memory", "leak_noise_secret", "leak_replace_secret",
                 "leak_shared_cache"]
WITH_OUT = {"leak_noise_secret", "leak_replace_secret"}

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or landlock_abi() == 0,
                                reason="server confinement needs Linux with Landlock")


@pytest.fixture
def side_plugins(monkeypatch):
    """The toy plug-in and the side-channel leaks, nothing else."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries,"
                       "sides=dpkit.testing.side_channels")
    monkeypatch.setenv("DPKIT_BUDGET_STORE", "off")
    dpkit.contract.plugins.reset()
    yield
    dpkit.contract.plugins.reset()


def _run(tmp_path, name: str) -> dict[str, dict]:
    out = tmp_path / name
    methods = "".join(f"\n  - {{name: {m}, params: {{out: '{out}'}}}}"
                      if m in WITH_OUT else f"\n  - {{name: {m}}}"
                      for m in SIDE_CHANNELS)
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"""name: {name}
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: toy_noise}}
baselines:{methods}
attacks: [{{name: leak_probe}}, {{name: secret_probe}}]
seeds: [0]
device: cpu
output: {out}
""")
    return rows_by_method(path)


def test_a_confined_server_reaches_no_file_no_client_memory_no_secret(tmp_path, side_plugins):
    rows = _run(tmp_path, "confined")
    assert (tmp_path / "confined" / ".dpkit-noise-secret").read_text().strip() != KNOWN_SECRET
    honest = rows["toy_noise"]
    assert math.isfinite(honest["privacy"]["epsilon"]) and honest["metrics"]["raw_found"] == 0.0
    for leak in SIDE_CHANNELS:
        assert "error" in rows[leak], (leak, rows[leak])
        assert "Permission denied" in rows[leak]["error"], rows[leak]["error"]
        assert "reads only code, system folders and public inputs" in rows[leak]["error"]
    # the server's own dpkit.cached(disk=True) worked; only the client's entry was refused
    assert "/shared/side-channel-private/" in rows["leak_shared_cache"]["error"]


def test_control_unconfined_each_route_reaches_the_private_rows(tmp_path, side_plugins,
                                                                monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "off")
    rows = _run(tmp_path, "unconfined")
    assert rows["leak_file"]["metrics"]["raw_found"] == 1.0
    assert rows["leak_shared_cache"]["metrics"]["raw_found"] == 1.0
    assert rows["leak_noise_secret"]["metrics"]["secret_found"] == 1.0
    assert (tmp_path / "unconfined" / ".dpkit-noise-secret").read_text().strip() == KNOWN_SECRET
    if client_memory_readable_unconfined():
        assert rows["leak_client_memory"]["metrics"]["raw_found"] == 1.0
    for leak in SIDE_CHANNELS:  # the wire saw only the honest release
        assert math.isfinite(rows[leak]["privacy"]["epsilon"]), rows[leak]["ledger"]
