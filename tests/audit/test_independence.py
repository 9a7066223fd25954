"""Independence of noise draws (dpkit.audit.independence) and the white-box noise laws
(dpkit.audit.noise_law): each test fails the dependence it is built for and passes fresh noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpkit.contract.plugins import get_registry
from dpkit.audit import Verdict, audit
from dpkit.audit.canary_split import independence_law
from dpkit.audit.independence import dependence, pair_tests
from dpkit.audit.noise_law import gaussian_pvalue, laplace_l2_pvalue, laplace_pvalue, reference_laplace_l2
from dpkit.testing.noise_bugs import reseeded_each_draw, reused_across_calls
from dpkit.testing.planted import PlantedBug


def test_fresh_continuous_noise_is_independent_and_repeats_are_counted():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(500, 4, generator=g), torch.randn(500, 4, generator=g)
    p, repeats = dependence(a, b)
    assert repeats == 0 and p > 1e-3
    b[:7] = a[:7]
    assert dependence(a, b) == (0.0, 7)
    b[:7] = a[:7] * (1 + 1e-8)  # equal up to rounding
    assert dependence(a, b) == (0.0, 7)


def test_correlated_noise_and_shared_radius_are_dependent():
    g = torch.Generator().manual_seed(1)
    a, fresh = torch.randn(2000, 3, generator=g), torch.randn(2000, 3, generator=g)
    assert dependence(a, 0.3 * a + fresh)[0] < 1e-6
    direction = fresh / fresh.norm(dim=1, keepdim=True)
    same_radius = direction * a.norm(dim=1, keepdim=True)  # one radius, two directions
    assert dependence(a, same_radius)[0] < 1e-6


def test_paired_tokens_agreeing_more_than_chance_are_dependent():
    g = torch.Generator().manual_seed(2)
    a = torch.randint(10, (1000,), generator=g)
    assert dependence(a, torch.randint(10, (1000,), generator=g))[0] > 1e-3
    copy = a.clone()
    copy[::3] = torch.randint(10, (334,), generator=g)
    assert dependence(a, copy)[0] < 1e-6


@pytest.mark.parametrize("bug", [reseeded_each_draw, reused_across_calls])
def test_every_pairing_sees_reseeded_or_reused_noise(bug):
    """Re-seeding before each draw and reusing one draw repeat the noise in all three pairings."""
    import dpkit.text.noise as noise

    def draw(gen):
        return noise.sample_laplace_noise(200, 3, 2.0, gen)

    fresh = pair_tests(draw, 0)
    assert all(t.repeats == 0 and t.p_value > 1e-4 for t in fresh), [t.describe() for t in fresh]
    with PlantedBug("x", "noise reused", "t", (bug("dpkit.text.noise", "sample_laplace_noise"),)).planted():
        broken = pair_tests(draw, 0)
    assert all(t.repeats == 200 for t in broken), [t.describe() for t in broken]


def test_audit_fails_noise_reused_across_calls_with_an_independence_witness():
    bug = PlantedBug("reuse", "noise reused", "laplace_dx",
                     (reused_across_calls("dpkit_baselines.laplace", "sample_laplace_noise"),))
    with bug.planted():
        report = audit("laplace_dx", {"eta": 5.0}, samples=400, seed=3, registry=get_registry())
    assert report.verdict is Verdict.FAIL
    assert report.witness.strategy.startswith("independence") and report.witness.measured == np.inf
    assert report.checks["independence"]["two calls"]["repeats"] == 400


@pytest.mark.parametrize("factor", [1.5, 1 / 1.5])
def test_laws_reject_a_one_and_a_half_scale_error(factor):
    rng = np.random.default_rng(4)
    assert laplace_l2_pvalue(reference_laplace_l2(rng, 2000, 6, 3.0), 3.0) > 1e-3
    assert laplace_l2_pvalue(reference_laplace_l2(rng, 2000, 6, 3.0 / factor), 3.0) < 1e-3
    assert gaussian_pvalue(rng.normal(0, 2.0, 3000), 2.0) > 1e-3
    assert gaussian_pvalue(rng.normal(0, 2.0 * factor, 3000), 2.0) < 1e-3
    assert laplace_pvalue(rng.laplace(0, 0.5, 3000), 0.5) > 1e-3
    assert laplace_pvalue(rng.laplace(0, 0.5 * factor, 3000), 0.5) < 1e-3


def test_split_audit_independence_law_sees_a_client_that_reseeds_per_text():
    g = torch.Generator().manual_seed(5)
    sent = torch.randn(100, 4, generator=g)
    fresh = sent + torch.randn(100, 4, generator=g)
    assert independence_law([fresh], sent, 10.0)["noise independence"][0] > 1e-3
    same = sent + torch.randn(1, 4, generator=g)          # one draw for every text
    assert independence_law([same], sent, 10.0)["noise independence"][0] == 0.0
    assert independence_law([same], sent, float("inf")) == {}


@pytest.mark.parametrize("name,params", [("laplace_dx", {"eta": 5.0}), ("text2text", {"eta": 5.0}),
                                         ("santext", {"epsilon": 2.0})])
def test_audit_reports_three_pairings_and_the_white_box_law(name, params):
    report = audit(name, params, samples=400, seed=1, registry=get_registry())
    assert report.verdict is not Verdict.FAIL and report.verdict is not Verdict.LAW_MISMATCH
    assert set(report.checks["independence"]) == {"two calls", "two cells", "two seeds"}
    assert ("noise_law" in report.checks) == (name != "santext")
    if name != "santext":
        law = report.checks["noise_law"]
        assert law["eta_declared"] == 5.0 and law["expected_mean_norm"] == pytest.approx(6 / 5.0)
        assert abs(law["mean_norm"] / law["expected_mean_norm"] - 1) < 0.1


def test_dependence_edges_small_samples_and_exact_pairs():
    g = torch.Generator().manual_seed(6)
    three = torch.randn(3, 2, generator=g)
    assert dependence(three, three) == (1.0, 0)  # fewer than 4 rows: nothing can be concluded
    four = torch.randn(4, 2, generator=g)
    assert dependence(four, four) == (0.0, 4)  # 4 rows are enough to see them repeated
    a, b = torch.randn(300, 2, generator=g), torch.randn(300, 2, generator=g)
    b[:2] = a[:2]  # two repeated rows are a repeat already
    assert dependence(a, b) == (0.0, 2)
    b[:2] = 0.0
    a[:2] = 0.0  # rows of exact zeros repeat too
    assert dependence(a, b) == (0.0, 2)
    big = 1e3 * torch.randn(300, 2, generator=g, dtype=torch.float64)
    near = 1e3 * torch.randn(300, 2, generator=g, dtype=torch.float64)
    near[:3] = big[:3] * (1 + 1e-7)  # equal up to rounding, at any magnitude
    assert dependence(big, near)[1] == 3


def test_dependence_p_value_is_bonferroni_over_fisher_z_tests():
    """Uncorrelated columns give p = 1 (capped; rows of equal norm, a column constant but for
    rounding, are no evidence); one correlated column gives the number of tests times its
    Fisher-z p-value; a null sample keeps its false-alarm rate."""
    import math

    from scipy import stats

    signs = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]]).repeat(25, 1)
    other = torch.stack([signs[:, 1], signs[:, 0]], 1)  # each column uncorrelated with its pair
    assert dependence(signs * torch.tensor([1.0, 2.0]), other)[0] == 1.0
    g = torch.Generator().manual_seed(7)
    x = torch.randn(200, 1, generator=g, dtype=torch.float64)
    y = 0.3 * x + torch.randn(200, 1, generator=g, dtype=torch.float64)
    r_col = float(np.corrcoef(x[:, 0], y[:, 0])[0, 1])
    r_norm = float(np.corrcoef(x.abs()[:, 0], y.abs()[:, 0])[0, 1])
    p_of = [2 * stats.norm.sf(abs(math.atanh(r)) * math.sqrt(200 - 3)) for r in (r_col, r_norm)]
    assert dependence(x, y)[0] == pytest.approx(min(1.0, 2 * min(p_of)), rel=1e-9)
    rng = np.random.default_rng(8)
    alarms = [dependence(torch.from_numpy(rng.normal(size=(60, 4))),
                         torch.from_numpy(rng.normal(size=(60, 4))))[0] < 0.05 for _ in range(300)]
    assert np.mean(alarms) <= 0.08  # Bonferroni over 5 tests keeps ≤ 5 % (+ sampling slack)


def test_correlation_p_handles_constant_and_perfectly_correlated_columns():
    from dpkit.audit.independence import _correlation_p

    u = np.tile([1.0, -1.0], 20)  # standard deviation exactly 1
    assert _correlation_p(np.ones(40), u) == 1.0 and _correlation_p(u, np.ones(40)) == 1.0
    assert _correlation_p(np.zeros(40), np.ones(40)) == 1.0
    on_sphere = np.linalg.norm(np.random.default_rng(1).normal(size=(40, 3)), axis=1)
    rounded = np.sqrt(5.0) + np.tile([0.0, 4.4e-16], 20)  # a norm equal but for its last bit
    assert _correlation_p(rounded, on_sphere) == 1.0
    assert _correlation_p(u, u) < 1e-12 and _correlation_p(u, -u) < 1e-12
    four = np.array([1.0, -1.0, 1.0, -1.0])  # np.corrcoef gives exactly ±1: atanh must stay finite
    assert _correlation_p(four, four) < 1e-6 and _correlation_p(four, -four) < 1e-6
    assert _correlation_p(np.zeros(40), u) == 1.0 and _correlation_p(u, np.zeros(40)) == 1.0
    huge = 1e8 + np.tile([0.0, 1.49e-8], 20)  # equal to 1e-16 of its size: constant
    assert _correlation_p(huge, on_sphere) == 1.0


def test_integer_dependence_compares_whole_rows_and_is_reproducible():
    g = torch.Generator().manual_seed(9)
    a = torch.randint(10, (200, 2), generator=g)
    assert dependence(a, a.clone())[0] < 1e-6  # every row agrees with its pair
    b = torch.randint(10, (200, 2), generator=g)
    p, repeats = dependence(a, b, seed=3)
    assert repeats == 0 and p > 1e-3
    assert dependence(a, b, seed=3) == (p, 0) and dependence(a, b) == dependence(a, b, seed=0)


def test_one_rare_token_paired_with_itself_is_evidence():
    """The agreement test's null spread has a floor of half an agreement: with one rare token
    among 20 and every other row alike, the null agrees in 18 or 20 rows; 20 observed is
    significant."""
    a = torch.zeros(20, dtype=torch.long)
    a[0] = 1
    assert dependence(a, a.clone())[0] < 1e-3


def test_pair_tests_describe_their_rows_and_are_reproducible():
    def draw(gen):
        return torch.randint(5, (120,), generator=gen)

    first, again = pair_tests(draw, 4), pair_tests(draw, 4)
    assert [t.p_value for t in first] == [t.p_value for t in again]
    assert [t.pairing for t in first] == ["two calls", "two cells", "two seeds"]
    assert all(t.rows == 120 for t in first)
    assert first[0].describe() == f"two calls: p = {first[0].p_value:.2g}, 0 of 120 rows repeated exactly"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_pair_tests_hand_a_cuda_mechanism_generators_on_its_device():
    """A mechanism drawing on the GPU refuses a CPU generator: every pairing's is on the device."""
    def draw(gen):
        return torch.randn(200, 3, generator=gen, device="cuda").cpu()

    tests = pair_tests(draw, 0, device="cuda")
    assert [t.pairing for t in tests] == ["two calls", "two cells", "two seeds"]
    assert all(t.repeats == 0 and t.p_value > 1e-4 for t in tests), [t.describe() for t in tests]


class _Outputs:
    """A mechanism seen only through its outputs (no ``noisy_vectors``): the black-box path."""

    def __init__(self, mech):
        self.mech = mech

    def privatize(self, *args, **kwargs):
        return self.mech.privatize(*args, **kwargs)


@pytest.mark.parametrize("white_box", [True, False])
def test_mechanism_draw_uses_the_generator_it_is_given(white_box):
    """Two draws from equally seeded generators are equal, from differently seeded ones not: the
    pairings then test the mechanism's own stream, and a re-seeding bug in it shows."""
    from dpkit.audit.independence import mechanism_draw
    from dpkit.audit.noise_law import exposes_noise
    from dpkit.testing.toy import ToySpace

    mech = get_registry().build("mechanism", "laplace_dx", {"eta": 5.0})
    mech = mech if white_box else _Outputs(mech)
    assert exposes_noise(mech) == white_box
    space = ToySpace(ToySpace.Params()).load(torch.device("cpu"))
    for per_row in (True, False):
        draw = mechanism_draw(mech, space.vectors[:1], 6, space, per_row)
        one, same = draw(torch.Generator().manual_seed(1)), draw(torch.Generator().manual_seed(1))
        other = draw(torch.Generator().manual_seed(2))
        assert one.shape[0] == 6 and torch.equal(one, same) and not torch.equal(one, other)
    sequence = mechanism_draw(mech, space.vectors[:3], 4, space, False)(torch.Generator().manual_seed(1))
    assert sequence.shape[0] == 4  # one row per call on the whole sequence



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("white_box", [True, False])
def test_mechanism_draw_moves_a_cpu_input_to_a_cuda_spaces_device(white_box):
    """An audit's input row may sit on the CPU: the draws on a CUDA space take it to the space's
    device (where the generator draws) and equal those of the row already there."""
    from dpkit.audit.independence import mechanism_draw
    from dpkit.testing.toy import ToySpace

    mech = get_registry().build("mechanism", "laplace_dx", {"eta": 5.0})
    mech = mech if white_box else _Outputs(mech)
    space = ToySpace(ToySpace.Params()).load(torch.device("cuda"))
    x = space.vectors[:1].cpu()
    for per_row in (True, False):
        drawn = mechanism_draw(mech, x, 6, space, per_row)(torch.Generator(device="cuda").manual_seed(1))
        there = mechanism_draw(mech, x.cuda(), 6, space, per_row)(
            torch.Generator(device="cuda").manual_seed(1))
        assert drawn.shape[0] == 6 and torch.equal(drawn.cpu(), there.cpu())

def test_pair_tests_of_a_mechanism_see_its_generator_reseeded():
    from dpkit.audit.independence import mechanism_draw
    from dpkit.testing.toy import ToySpace

    mech = get_registry().build("mechanism", "laplace_dx", {"eta": 5.0})
    space = ToySpace(ToySpace.Params()).load(torch.device("cpu"))
    for per_row, x in ((True, space.vectors[:1]), (False, space.vectors[:2])):
        draw = mechanism_draw(mech, x, 100, space, per_row)
        assert all(t.repeats == 0 for t in pair_tests(draw, 0))
        bug = PlantedBug("x", "noise reused", "t", (reseeded_each_draw("dpkit_baselines.laplace",
                                                                   "sample_laplace_noise"),))
        with bug.planted():
            broken = pair_tests(draw, 0)
        assert all(t.repeats > 1 for t in broken), [t.describe() for t in broken]
