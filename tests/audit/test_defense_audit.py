"""Canary audits of whole defenses: broken ones FAIL with a witness, built-in ones do not."""

import pytest

from dpkit.audit import Verdict, audit_defense
from dpkit.audit.defense import describe
from dpkit.cli.main import main
from dpkit.testing import DefenseAuditContract

from dpkit.contract.plugins import get_plugin_system, register_plugin

from . import defense_broken
from .defense_broken import (
    CleanAlongsideSnD,
    NoiselessDpsgd,
    NoiselessThresholdPate,
    UnclippedDpsgd,
)
from dpkit.contract.plugins import get_registry


@pytest.fixture(scope="module", autouse=True)
def _broken_defense_audits():
    """The broken defenses' audit adapters, registered through the hook like a plug-in's."""
    register_plugin(defense_broken, "audit_broken_defenses")
    yield
    get_plugin_system().remove("audit_broken_defenses")

# C is small so that clipping binds: a clipping bug can only show where gradients exceed C.
DPSGD = {"target_epsilon": 2.0, "steps": 200, "sampling_rate": 0.02, "dim": 16,
         "pairs_per_doc": 4, "max_grad_norm": 0.001}
AGGREGATION = {"target_epsilon": 2.0}
SPLIT = {"eta": 10.0}
BUILT_IN = [("dped_dpsgd", DPSGD), ("dped", AGGREGATION), ("dped_pate", AGGREGATION),
            ("snd", SPLIT), ("hiddenecho", SPLIT)]


@pytest.mark.parametrize("defense,params", [(NoiselessDpsgd, DPSGD), (UnclippedDpsgd, DPSGD),
                                            (NoiselessThresholdPate, AGGREGATION),
                                            (CleanAlongsideSnD, SPLIT)],
                         ids=lambda v: getattr(v, "name", ""))
def test_broken_defense_fails_with_witness(defense, params):
    report = audit_defense(defense, params, canaries=500, seed=0, registry=get_registry())
    assert report.verdict is Verdict.FAIL, describe(report)
    assert report.witness is not None and report.witness.measured > report.witness.claimed
    assert "witness:" in describe(report)


class TestDpsgdAudit(DefenseAuditContract):
    defense, params = BUILT_IN[0]


class TestDpedAudit(DefenseAuditContract):
    defense, params = BUILT_IN[1]


class TestPateAudit(DefenseAuditContract):
    defense, params = BUILT_IN[2]


class TestSndAudit(DefenseAuditContract):
    defense, params = BUILT_IN[3]


class TestHiddenEchoAudit(DefenseAuditContract):
    defense, params = BUILT_IN[4]


@pytest.mark.slow
@pytest.mark.parametrize("defense,params", BUILT_IN, ids=[n for n, _ in BUILT_IN])
def test_built_in_defense_never_fails_over_ten_seeds(defense, params):
    verdicts = [audit_defense(defense, params, canaries=500, seed=s, registry=get_registry()).verdict
                for s in range(10)]
    assert Verdict.FAIL not in verdicts and Verdict.LAW_MISMATCH not in verdicts, verdicts


def test_cli_exit_codes(capsys):
    assert main(["audit", "--defense", "dped_pate", "--params", '{"target_epsilon": 2}',
                 "--canaries", "200"]) == 0
    assert "ledger ε per canary" in capsys.readouterr().out
    # a claim beyond what 200 canaries can ever show: INCONCLUSIVE, exit 3
    assert main(["audit", "--defense", "dped_pate", "--params", '{"target_epsilon": 5000}',
                 "--canaries", "200"]) == 3
    assert main(["audit", "--defense", "dped_nonprivate"]) == 2
    assert main(["audit", "laplace_dx", "--defense", "dped"]) == 2


@pytest.mark.parametrize("defense,verdicts", [(CleanAlongsideSnD, {Verdict.FAIL}),
                                              ("snd", {Verdict.PASS, Verdict.INCONCLUSIVE})],
                         ids=["broken", "snd"])
def test_repeated_runs_method(defense, verdicts):
    """One canary per run, Clopper–Pearson bound (Jagielski et al. 2020)."""
    report = audit_defense(defense, {"eta": 3.0}, method="repeated", runs=100, seed=1, registry=get_registry())
    assert report.verdict in verdicts, describe(report)
    assert report.strategies == ["repeated canaries"] and report.samples == 100
