"""``dpkit new plugin``: the written package installs, is listed, and passes its own tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpkit.cli.main import main
from dpkit.cli.new import names, write_plugin

ROOT = Path(__file__).parents[2]


KIND_FILES = {
    "mechanism": {"mechanism.py", "planted.py"},
    "defense": {"client.py", "server.py", "defense.py", "planted.py"},
    "attack": {"attack.py"},
    "dataset": {"dataset.py"},
}


def test_writes_a_complete_package(tmp_path):
    root = write_plugin("my-mech", tmp_path)
    assert root.name == "dpkit-my-mech"
    expected = {"pyproject.toml", "README.md", ".gitignore", "dpkit_my_mech/__init__.py",
                "dpkit_my_mech/params.py", "dpkit_my_mech/mechanism.py",
                "dpkit_my_mech/planted.py", "tests/test_my_mech.py"}
    assert {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} == expected
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.dpkit]\nmy_mech = "dpkit_my_mech"' in pyproject
    assert "class TestMyMechContract(MechanismContract)" in (root / "tests/test_my_mech.py").read_text()
    assert "__pycache__/" in (root / ".gitignore").read_text()


def test_dir_is_where_the_package_goes(tmp_path, capsys):
    target = tmp_path / "somewhere" / "mine"
    assert main(["new", "plugin", "my-mech", "--dir", str(target)]) == 0
    assert (target / "pyproject.toml").is_file() and (target / "dpkit_my_mech").is_dir()
    assert not (target / "dpkit-my-mech").exists()
    assert f"wrote {target}/" in capsys.readouterr().out
    assert main(["new", "plugin", "other", "--dir", str(target)]) == 2  # not empty: refused
    assert "not an empty folder" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["new", "plugin", "my-mech", "--dir", str(empty)]) == 0


def test_names_and_refusals(tmp_path, capsys, monkeypatch):
    assert names("dpkit-rr")["package"] == "dpkit_rr" and names("rr_2")["cls"] == "Rr2"
    assert main(["new", "plugin", "Bad Name", "--dir", str(tmp_path)]) == 2
    assert "lower-case" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["new", "plugin", "again"]) == 0
    assert (tmp_path / "dpkit-again" / "pyproject.toml").is_file()
    assert main(["new", "plugin", "again"]) == 2
    assert "already exists" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["new", "plugin", "x", "--kind", "optimizer", "--dir", str(tmp_path / "o")])
    assert exited.value.code == 2 and "invalid choice: 'optimizer'" in capsys.readouterr().err


def loaded_env(*roots: Path) -> dict[str, str]:
    """Run with the generated packages importable and loaded as plug-ins (not installed)."""
    names = ",".join(f"{r.name.removeprefix('dpkit-').replace('-', '_')}="
                     f"dpkit_{r.name.removeprefix('dpkit-').replace('-', '_')}" for r in roots)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DPKIT_EXTRA_PLUGINS": names,
           "PYTHONPATH": os.pathsep.join([*map(str, roots), str(ROOT), str(ROOT / "plugins")])}
    env.pop("DPKIT_LOAD_PLUGINS", None)
    return env


@pytest.mark.parametrize("kind", sorted(KIND_FILES))
def test_each_kind_is_a_working_tested_component(tmp_path, kind):
    """The package of each kind passes its own tests (contract suite, noiseless row, planted
    bugs, boundary), lints clean, and imports only dpkit and dpkit.testing."""
    from dpkit.testing import api_violations

    root = write_plugin(f"acme-{kind}", tmp_path, kind=kind)
    package = root / f"dpkit_acme_{kind}"
    assert KIND_FILES[kind] <= {p.name for p in package.iterdir()}
    assert api_violations(sorted(package.rglob("*.py")), package.name, ["dpkit_baselines"]) == []
    lint = subprocess.run([sys.executable, "-m", "ruff", "check", "--line-length", "110",
                           "--select", "F,E,W,B", str(root)], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           cwd=root, env=loaded_env(root), capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout


def test_the_defense_and_mechanism_pass_dpkit_audit(tmp_path):
    defense = write_plugin("acme-guard", tmp_path, kind="defense")
    mechanism = write_plugin("acme-rr", tmp_path, kind="mechanism")
    env = loaded_env(defense, mechanism)
    for argv in (["audit", "--defense", "acme_guard", "--params", '{"noise_multiplier": 2}'],
                 ["audit", "acme_rr", "--params", '{"epsilon": 2}']):
        done = subprocess.run([sys.executable, "-m", "dpkit.cli.main", *argv], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.startswith("PASS"), done.stdout + done.stderr


@pytest.mark.slow
def test_package_installs_lists_and_passes_its_tests(tmp_path):
    """The defense kind, pip-installed (not loaded by hand): listed, and its tests pass."""
    root = write_plugin("scaffold-check", tmp_path, kind="defense")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(site), str(root)], check=True,
                   capture_output=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), str(ROOT / "plugins")])}
    env.pop("DPKIT_LOAD_PLUGINS", None)
    listed = subprocess.run([sys.executable, "-m", "dpkit.cli.main", "plugins", "--json"],
                            env=env, capture_output=True, text=True, check=True)
    mine = [p for p in json.loads(listed.stdout) if p["name"] == "scaffold_check"]
    assert mine and mine[0]["components"] == {"defense": ["scaffold_check"]}
    assert not mine[0]["errors"]
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                           cwd=root, env=env, capture_output=True, text=True)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-2000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout
