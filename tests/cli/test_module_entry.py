"""``python -m dpkit`` runs the same CLI as the ``dpkit`` script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

QUICK = Path(__file__).resolve().parents[2] / "specs" / "quick.yaml"


def test_python_dash_m_dpkit_validates_a_spec_and_passes_the_exit_status(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "dpkit", "validate", str(QUICK)],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "ok" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    refused = subprocess.run([sys.executable, "-m", "dpkit", "validate", str(bad)],
                             capture_output=True, text=True)
    assert refused.returncode == 2
