"""`dpkit run` locks its output folder before it imports the spec machinery, the runner, the
reports or any plug-in: the folder it reads from the YAML alone is the folder the full reader
gives, for every spec and through includes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit.cli.run import declared_output
from dpkit.runner.lock import OutputLock
from dpkit.spec import parse_structure, read_yaml

ROOT = Path(__file__).resolve().parents[2]
SPECS = sorted((ROOT / "specs").glob("*.yaml")) + sorted((ROOT / "specs" / "paper").glob("*.yaml"))


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_early_folder_is_the_full_readers_folder(path):
    assert declared_output(path) == parse_structure(read_yaml(path), str(path)).output_dir()


@pytest.mark.parametrize("child,expected", [
    ("include: base.yaml\n", "from-base"),
    ("include: base.yaml\nname: kid\n", "from-base"),
    ("include: base.yaml\nname: kid\noutput: null\n", "runs/kid"),
    ("include: [base.yaml, other.yaml]\n", "runs/other"),
    ("include: sub/deeper.yaml\n", "runs/deeper"),
])
def test_includes_and_null_give_the_same_folder(tmp_path, child, expected):
    body = "data: {name: toy_text}\ndefense: {name: toy_noise}\n"
    (tmp_path / "base.yaml").write_text("name: base\noutput: from-base\n" + body)
    (tmp_path / "other.yaml").write_text("name: other\noutput: null\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deeper.yaml").write_text("include: ../base.yaml\nname: deeper\n"
                                                  "output: null\n")
    path = tmp_path / "child.yaml"
    path.write_text(child)
    assert declared_output(path) == Path(expected)
    assert parse_structure(read_yaml(path), str(path)).output_dir() == Path(expected)


@pytest.mark.parametrize("text", ["include: me.yaml\nname: x\n", "[1, 2]\n", "name: [\n",
                                  "include: missing.yaml\nname: x\n", "name: {a: 1}\n"])
def test_what_yaml_alone_cannot_say_is_left_to_the_full_reader(tmp_path, text):
    path = tmp_path / "me.yaml"
    path.write_text(text)
    assert declared_output(path) is None


def test_a_busy_folder_is_refused_before_the_spec_machinery_or_a_plugin_is_imported(tmp_path):
    out = tmp_path / "out"
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: s\ndata: {{name: toy_text}}\ndefense: {{name: toy_noise}}\n"
                    f"output: {out}\n")
    probe = ("import json, sys\nfrom dpkit.cli.main import main\n"
             f"status = main(['run', {str(spec)!r}, '--no-progress'])\n"
             "heavy = sorted(m for m in sys.modules if m.startswith(('dpkit.spec', "
             "'dpkit.runner.run', 'dpkit.report', 'dpkit.evidence', 'dpkit_')))\n"
             "print(json.dumps([status, heavy]))\n")
    env = {**os.environ, "DPKIT_EXTRA_PLUGINS": "toy=dpkit.testing.toy"}
    with OutputLock(out):
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              text=True, timeout=300)
    status, heavy = json.loads(done.stdout.splitlines()[-1])
    assert status == 2 and "in use by another dpkit run" in done.stderr
    assert heavy == []
