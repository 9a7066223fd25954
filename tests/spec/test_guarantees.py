"""Spec-level guarantee checks: what every cell's ledger would refuse is refused once, before
the first cell, with the fix in the spec's ``privacy:`` block."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import Field

import dpkit
import dpkit.contract.plugins
from dpkit.accounting import DpGuarantee
from dpkit.base.errors import SpecError
from dpkit.cli.main import main
from dpkit.runner import run_spec
from dpkit.spec import load_spec
from dpkit.spec.check import check_spec
from dpkit.contract.plugins import get_registry


class PureReplaceOne:
    """k-ary randomized response over the vocabulary: pure ε-DP per token, replace-one."""

    name = "pure_rr"
    domain = "token"

    class Params(dpkit.Params):
        """ε of one token."""

        epsilon: float = Field(2.0, gt=0)

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        """ε-DP per token, stated for replacing one token."""
        return DpGuarantee.pure(self.params.epsilon, "rr", neighboring="replace_one")

    def privatize(self, x, *, space, generator):
        """Keep with probability e^ε / (e^ε + V − 1), else a uniform other token."""
        keep = 1.0 / (1.0 + (space.size - 1) * math.exp(-self.params.epsilon))
        coin = torch.rand(x.shape, generator=generator, device=x.device)
        shift = 1 + torch.randint(space.size - 1, x.shape, generator=generator, device=x.device)
        return torch.where(coin < keep, x, (x + shift) % space.size)


class _Plugin:
    @dpkit.hookimpl
    def dpkit_register_mechanisms(self, register):
        register(PureReplaceOne)


@pytest.fixture
def pure_plugins(monkeypatch):
    """The toy plug-in, the built-in ``privatize_text`` task and the randomized response above."""
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "tasks")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy")
    dpkit.contract.plugins.reset()
    dpkit.contract.plugins.register_plugin(_Plugin(), "pure_rr_test")
    yield dpkit.contract.plugins.get_registry()
    dpkit.contract.plugins.reset()


def write_spec(tmp_path, privacy: str = "", defense: bool = False):
    body = ("defense: {name: toy_noise, label: Toy, params: {eta: 1.0}}\n" if defense else
            "mechanism: {name: pure_rr, label: RR, params: {epsilon: 2}, "
            "sweep: {epsilon: [1, 2, 4]}}\n")
    path = tmp_path / "rr.yaml"
    path.write_text("name: rr\ndata: {name: toy_text, params: {n_docs: 16}}\n"
                    f"model: {{name: toy_space}}\n{body}seeds: [0, 1]\ndevice: cpu\n"
                    f"output: {tmp_path / 'out'}\n{privacy}")
    return path


def test_validate_refuses_replace_one_omission_once_with_the_spec_fix(tmp_path, pure_plugins,
                                                                      capsys):
    path = write_spec(tmp_path)
    assert main(["validate", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}: privacy.neighboring")
    assert "add `privacy: {neighboring: replace_one}` to the spec" in lines[0]
    assert "'RR'" in lines[0] and len(lines[0]) < 400
    assert not (tmp_path / "out").exists()


def test_the_fix_validates_and_runs(tmp_path, pure_plugins, capsys):
    path = write_spec(tmp_path, "privacy: {neighboring: replace_one}\n")
    assert main(["validate", str(path)]) == 0
    outcome = run_spec(load_spec(path, registry=get_registry()), show_progress=False, registry=get_registry())
    assert len(outcome.rows) == 6 and not outcome.failures


def test_an_existing_privacy_block_is_named_for_the_fix(tmp_path, pure_plugins):
    path = write_spec(tmp_path, "privacy: {delta: 1.0e-6}\n")
    with pytest.raises(SpecError, match=r"set `neighboring: replace_one` in the spec's `privacy:`"):
        check_spec(load_spec(path, registry=get_registry()), get_registry())


def test_each_distinct_component_and_params_is_built_once(tmp_path, pure_plugins, monkeypatch):
    built = []
    original = PureReplaceOne.guarantee
    monkeypatch.setattr(PureReplaceOne, "guarantee",
                        lambda self, space=None: built.append(self.params.epsilon)
                        or original(self, space))
    path = write_spec(tmp_path, "privacy: {neighboring: replace_one}\n")
    check_spec(load_spec(path, registry=get_registry()), get_registry())
    assert sorted(built) == [1.0, 2.0, 4.0]  # three sweep points, two seeds each: three checks


def test_run_refuses_a_defense_whose_data_declared_releases_the_ledger_refuses(
        tmp_path, pure_plugins, monkeypatch):
    from dpkit.testing.toy import ToyNoise

    monkeypatch.setattr(ToyNoise, "guarantee", lambda self, space: DpGuarantee.pure(
        1.0, "toy", neighboring="replace_one"))
    path = write_spec(tmp_path, defense=True)
    spec = load_spec(path, registry=get_registry())
    check_spec(spec, get_registry())  # toy_noise states its releases from the data: validate cannot see them
    with pytest.raises(SpecError, match=r"privacy\.neighboring.*replace_one"):
        run_spec(spec, show_progress=False, registry=get_registry())
    assert not (tmp_path / "out" / "results.jsonl").exists()
