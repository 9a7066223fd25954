"""Correct mechanisms must not FAIL; exact values are tight; the verdict rules behave."""

import math

import pytest

from dpkit.audit import Verdict, audit
from dpkit.base.errors import AuditError, ParamsError

from reference import RefLaplace, laplace_noise
from dpkit.contract.plugins import get_registry

CORRECT = {
    "ref_laplace": {"eta": 2.0},
    "ref_exponential": {"epsilon": 1.0},
    "ref_gaussian": {"sigma": 2.0},
    "ref_rr": {"epsilon": 1.0},
}


@pytest.mark.parametrize("name", sorted(CORRECT))
@pytest.mark.parametrize("seed", [0, 1])
def test_correct_mechanism_does_not_fail(name, seed):
    report = audit(name, CORRECT[name], samples=2000, seed=seed, registry=get_registry())
    assert report.verdict is Verdict.PASS, report.one_line()


def test_exact_density_reaches_the_claim_for_laplace():
    """On the line through x and x' the Laplace privacy loss equals η·d: the bound is tight."""
    report = audit("ref_laplace", {"eta": 2.0}, samples=1000, seed=0, registry=get_registry())
    exact = [f for f in report.findings if f.strategy == "exact density"]
    assert exact and all(f.measured <= f.claimed * (1 + 1e-6) for f in exact)
    assert max(f.ratio for f in exact) == pytest.approx(1.0, abs=1e-5)


def test_exact_probabilities_stay_below_claim_for_exponential():
    report = audit("ref_exponential", {"epsilon": 1.5}, samples=1000, seed=0, registry=get_registry())
    exact = [f for f in report.findings if f.strategy == "exact output probabilities"]
    assert exact and all(f.measured <= f.claimed * (1 + 1e-9) for f in exact)
    assert report.checks["sampler_matches_declared_law"] is True


class MoreNoiseLaplace(RefLaplace):
    """Declares η and the η density but samples with η/2: private, yet its density is false."""

    name = "more_noise_laplace"

    def privatize(self, x, *, space=None, generator):
        return x + laplace_noise(x.shape[0], x.shape[1], self.params.eta / 2, generator, x.device)


def test_false_density_is_a_law_mismatch_not_a_pass():
    report = audit(MoreNoiseLaplace, {"eta": 2.0}, samples=2000, seed=0, registry=get_registry())
    assert report.verdict is Verdict.LAW_MISMATCH, report.one_line()
    assert report.verdict.exit_code == 4
    assert "declared output law" in report.reason and "norm" in report.reason


def test_claims_beyond_sample_reach_are_inconclusive():
    report = audit("ref_rr", {"epsilon": 30.0}, samples=200, seed=0, registry=get_registry())
    assert report.verdict is Verdict.INCONCLUSIVE
    assert report.checks["certifiable_epsilon"] < 30


def test_gaussian_claim_uses_the_ledger_epsilon():
    import dp_accounting

    from dpkit.accounting import DpGuarantee, Ledger

    report = audit("ref_gaussian", {"sigma": 2.0}, samples=500, seed=0, registry=get_registry())
    ledger = Ledger(delta=1e-5)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "x")
    assert report.findings
    assert all(f.claimed == pytest.approx(ledger.epsilon()) for f in report.findings)


def test_bad_inputs_raise():
    with pytest.raises(ParamsError):
        audit("ref_laplace", {"eta": -1.0}, registry=get_registry())
    with pytest.raises(AuditError):
        audit("ref_laplace", {"eta": 1.0}, confidence=1.5, registry=get_registry())
    with pytest.raises(AuditError):
        audit("ref_laplace", {"eta": 1.0}, samples=10, registry=get_registry())


def test_report_serialises_and_one_line_names_values():
    report = audit("ref_laplace", {"eta": 2.0}, samples=400, seed=0, registry=get_registry())
    data = report.to_dict()
    assert data["verdict"] == "PASS" and data["mechanism"] == "ref_laplace"
    assert "claimed" in report.one_line() and "measured" in report.one_line()
    assert math.isfinite(report.seconds) and report.samples_drawn >= 4 * 400
