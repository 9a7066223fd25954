"""LAW_MISMATCH: samplers that do not follow their declared law, caught in any dimension."""

import math

import pytest
import torch
from scipy import stats

from dpkit.audit import Verdict, audit
from dpkit.audit.law import norm_cdf, radial_law_pvalues, radial_profile
from dpkit.contract.plugins import get_registry
from dpkit.testing import MechanismContract

from reference import laplace_log_density, laplace_noise

BROKEN_SAMPLERS = ("broken_half_scale_laplace", "broken_per_coordinate_gamma")


@pytest.mark.parametrize("name", BROKEN_SAMPLERS)
def test_broken_samplers_are_a_law_mismatch_at_contract_size(name):
    report = audit(name, {"eta": 2.0}, samples=MechanismContract.audit_samples,
                   confidence=MechanismContract.audit_confidence, seed=0, registry=get_registry())
    assert report.verdict is Verdict.LAW_MISMATCH, report.one_line()
    assert report.verdict.exit_code == 4
    assert report.checks["law_tests"]["norm"] < 1e-12


@pytest.mark.parametrize("name", BROKEN_SAMPLERS)
def test_contract_suite_fails_on_a_law_mismatch(name):
    class Contract(MechanismContract):
        mechanism = name
        params = {"eta": 2.0}

    with pytest.raises(AssertionError, match="LAW_MISMATCH"):
        Contract().test_audit_does_not_fail()


@pytest.mark.parametrize("d", [1, 6, 50, 300])
def test_norm_cdf_is_the_gamma_law_of_the_laplace_norm(d):
    eta = 2.5
    x = torch.randn(d, dtype=torch.float64)
    profile = radial_profile(lambda a, b: laplace_log_density(a, b, eta), x, d / eta,
                             torch.Generator().manual_seed(0))
    cdf = norm_cdf(profile, d, d / eta)
    radii = stats.gamma(d, scale=1 / eta).ppf([0.001, 0.1, 0.5, 0.9, 0.999])
    assert cdf(radii) == pytest.approx([0.001, 0.1, 0.5, 0.9, 0.999], abs=2e-6)


def test_correct_draws_pass_and_a_non_radial_density_is_skipped():
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(50, dtype=torch.float64)
    draws = x + laplace_noise(4000, 50, 2.0, gen, "cpu").double()
    pvalues = radial_law_pvalues(lambda a, b: laplace_log_density(a, b, 2.0), x, draws)
    assert set(pvalues) == {"norm", "direction", "direction|small norm", "direction|large norm"}
    assert min(pvalues.values()) * len(pvalues) > 1e-3

    def axis_weighted(a, b):
        return -(b - a).abs().sum(-1) - (b - a)[..., 0] ** 2

    assert radial_law_pvalues(axis_weighted, x, draws) == {}


def test_dp_claims_do_not_show_a_distance():
    report = audit("ref_gaussian", {"sigma": 2.0}, samples=400, seed=0, registry=get_registry())
    assert report.claim_kind == "dp" and " at d=" not in report.one_line()
    metric = audit("ref_laplace", {"eta": 2.0}, samples=400, seed=0, registry=get_registry())
    assert " at d=" in metric.one_line()


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.parametrize("name", BROKEN_SAMPLERS)
def test_broken_samplers_are_a_law_mismatch_on_glove_50d(name):
    """The real 400,000 × 50 GloVe table: sampling alone cannot refute these claims there."""
    from dpkit.contract.plugins import get_registry

    space = get_registry().build("model", "glove-6b-50d", {}).load(torch.device("cpu"))

    class OnGlove(MechanismContract):
        mechanism = name
        params = {"eta": 2.0}

        def make_space(self):
            return space

    with pytest.raises(AssertionError, match="LAW_MISMATCH"):
        OnGlove().test_audit_does_not_fail()
    correct = audit("ref_laplace", {"eta": 2.0}, samples=MechanismContract.audit_samples,
                    confidence=MechanismContract.audit_confidence, seed=0, space=space,
                    registry=get_registry())
    assert correct.verdict is Verdict.PASS, correct.one_line()
    assert math.isfinite(correct.checks["sampler_matches_declared_law_p"])


def test_pure_guarantees_are_audited_at_their_declared_epsilon():
    from dpkit.accounting import DpGuarantee
    from dpkit.audit import Claim
    from reference import RefRandomizedResponse

    claim = Claim.from_guarantee(DpGuarantee.pure(2.0), delta=1e-5)
    assert (claim.kind, claim.epsilon, claim.delta) == ("dp", 2.0, 0.0)
    assert Claim.from_guarantee(DpGuarantee.pure(2.0, neighboring="add_remove"), 1e-5).epsilon == 4.0

    class PureRR(RefRandomizedResponse):
        name = "pure_rr"

        def guarantee(self, space=None):
            return DpGuarantee.pure(self.params.epsilon)

    assert audit(PureRR, {"epsilon": 2.0}, samples=4000, seed=0, registry=get_registry()).verdict is Verdict.PASS

    class Understated(PureRR):
        name = "understated_rr"

        def guarantee(self, space=None):
            return DpGuarantee.pure(self.params.epsilon / 4)

    report = audit(Understated, {"epsilon": 4.0}, samples=4000, seed=0, registry=get_registry())
    assert report.verdict is Verdict.FAIL, report.one_line()


def test_randomized_response_events_are_audited_under_replace_one():
    import dp_accounting

    from dpkit.accounting import DpGuarantee
    from dpkit.audit import Claim

    rr = dp_accounting.RandomizedResponseDpEvent(noise_parameter=0.5, num_buckets=10)
    claim = Claim.from_guarantee(DpGuarantee(rr), delta=1e-5)
    assert claim.kind == "dp" and claim.epsilon == pytest.approx(math.log(11), rel=1e-2)
