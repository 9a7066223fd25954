"""Same seed, same numbers: a DPED cell rerun in a fresh process gives bit-identical results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent

CELL = """
import json, sys, torch
from pathlib import Path
sys.path.insert(0, {here!r})
from conftest import TEACHER, TinyPublic, TinyTopics, tiny_dataset
from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.boundary.session import connector
from dpkit.contract.registry import Registry
from dpkit_dped.defenses import DpedDefense
from dpkit_dped.pipeline import prepare, teacher_models

torch.set_num_threads(1)
reg = Registry()
reg.add("dataset", TinyPublic, "tests")
reg.add("dataset", TinyTopics, "tests")
ctx = RunContext(connect=connector("inprocess"), dataset=tiny_dataset("tiny_private", 120, 30, seed=0), model=None,
                 device=torch.device("cpu"), seed=0, ledger=Ledger(1e-5), registry=reg,
                 cache_dir=Path({cache!r}))
params = DpedDefense.Params.model_validate({{**TEACHER, "workers": {workers}}})
result = DpedDefense(params).run(ctx)
teacher = teacher_models(ctx, prepare(ctx, params), params)[0].vectors
print(json.dumps({{"metrics": result.metrics, "curves": result.training_curves,
                  "teacher": teacher.flatten().tolist()}}, sort_keys=True))
"""


def run_cell(tmp_path: Path, name: str, hash_seed: str, workers: int = 1) -> dict:
    """Run the cell in a fresh interpreter with its own empty cache and ``PYTHONHASHSEED``."""
    code = CELL.format(here=str(HERE), cache=str(tmp_path / name), workers=workers)
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_rerun_from_an_empty_cache_is_bit_identical(tmp_path):
    first = run_cell(tmp_path, "a", hash_seed="1")
    second = run_cell(tmp_path, "b", hash_seed="2")
    assert first["teacher"] == second["teacher"]  # exact floats, not approximately
    assert first["metrics"] == second["metrics"]
    assert first["curves"] == second["curves"]
    assert len(first["curves"]) == 1 + 1 + 4  # student, public reference, 4 teachers
