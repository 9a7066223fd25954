"""The contract suites: they pass on correct mechanisms and catch broken ones."""

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

import dpkit
from dpkit.testing import (
    AttackContract,
    DefenseContract,
    MechanismContract,
    same_distribution,
    strategies,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "audit"))

import reference

pytestmark = pytest.mark.usefixtures("audit_test_plugins")


class TestRefLaplaceContract(MechanismContract):
    mechanism = "ref_laplace"
    params = {"eta": 2.0}
    invalid_params = [{"eta": -1.0}, {"eta": 0}, {}]


class TestRefExponentialContract(MechanismContract):
    mechanism = reference.RefExponential  # a class works as well as a registered name
    params = {"epsilon": 1.0}
    invalid_params = [{"epsilon": "high"}]
    audit_samples = 800


class TestBuiltInLaplaceContract(MechanismContract):
    mechanism = "laplace_dx"
    params = {"eta": 4.0}
    invalid_params = [{"eta": -4.0}, {"eta": 4.0, "clip_bound": 0}]

    @pytest.fixture(autouse=True)
    def _needs_plugin(self):
        from dpkit.contract.plugins import get_registry
        if "laplace_dx" not in get_registry().entries["mechanism"]:
            pytest.skip("laplace_dx not registered")


class BrokenIdentity(MechanismContract):
    mechanism = "broken_identity_substitution"
    params = {"epsilon": 1.0}
    audit_samples = 400


def test_contract_audit_catches_a_broken_mechanism():
    with pytest.raises(AssertionError, match="FAIL"):
        BrokenIdentity().test_audit_does_not_fail()


def test_contract_catches_unvalidated_params():
    class Loose(MechanismContract):
        mechanism = "ref_laplace"
        params = {"eta": 1.0}
        invalid_params = [{"eta": 2.0}]  # valid, so the contract must complain

    with pytest.raises(pytest.fail.Exception):
        Loose().test_invalid_params_rejected()


class RowCoupled(reference.RefLaplace):
    """Adds the same noise to every row of a batch: batching changes the law."""

    name = "row_coupled"

    def privatize(self, x, *, space=None, generator):
        noise = reference.laplace_noise(1, x.shape[1], self.params.eta, generator, x.device)
        return x + noise


def test_contract_catches_batch_dependence():
    class Coupled(MechanismContract):
        mechanism = RowCoupled
        params = {"eta": 1.0}

    with pytest.raises(AssertionError, match="batching"):
        Coupled().test_batch_invariance()


def test_same_distribution_tells_laws_apart():
    gen = torch.Generator().manual_seed(0)
    x = torch.zeros(3)
    a = torch.randn(500, 3, generator=gen)
    assert same_distribution(a, torch.randn(500, 3, generator=gen), x)
    assert not same_distribution(a, 2 * torch.randn(500, 3, generator=gen), x)
    ids = torch.randint(5, (500, 1), generator=gen)
    assert same_distribution(ids, torch.randint(5, (500, 1), generator=gen), x)
    assert not same_distribution(ids, torch.randint(3, (500, 1), generator=gen), x)


@settings(max_examples=min(25, settings.default.max_examples), deadline=None)
@given(strategies.valid_params(reference.RefLaplace.Params))
def test_valid_params_strategy_respects_bounds(params):
    assert reference.RefLaplace.Params.model_validate(params).eta > 0


@settings(max_examples=min(15, settings.default.max_examples), deadline=None)
@given(strategies.embedding_spaces(max_vocab=12), strategies.embedding_batches(dim=3))
def test_space_and_batch_strategies(space, batch):
    assert space.vectors.shape == (space.size, space.dim) and 4 <= space.size <= 12
    assert batch.shape[1] == 3 and batch.abs().max() <= 3.0


@settings(max_examples=min(15, settings.default.max_examples), deadline=None)
@given(strategies.embedding_spaces(max_vocab=10).flatmap(
    lambda s: strategies.token_id_sequences(s, max_len=6).map(lambda ids: (s, ids))))
def test_exponential_log_ratio_bounded_for_any_space(case):
    """A property test built from the strategies: ε·d holds for every pair in any space."""
    space, _ = case
    mech = reference.RefExponential(reference.RefExponential.Params(epsilon=1.3))
    lp = mech.output_log_probs(torch.arange(space.size), space)
    worst = (lp.unsqueeze(1) - lp.unsqueeze(0)).amax(-1)
    dist = torch.cdist(space.vectors.double(), space.vectors.double())
    assert (worst <= 1.3 * dist + 1e-9).all()


class TestNnInversionAttackContract(AttackContract):
    attack = "nn_inversion"
    params = {}
    invalid_params = [{"k": -3}]

    @pytest.fixture(autouse=True)
    def _needs_plugin(self):
        from dpkit.contract.plugins import get_registry
        if "nn_inversion" not in get_registry().entries["attack"]:
            pytest.skip("nn_inversion not registered")


class MeanServer(dpkit.Server):
    """The passive server, which also takes the release ``mean`` (not a standard name)."""

    receives = ("mean",)


class NoisyMeanDefense:
    """Sends the Gaussian-noised mean of the space's vectors (declared before running)."""

    name = "noisy_mean_defense"
    requires_spend = True
    server = MeanServer

    class Params(dpkit.Params):
        sigma: float = 1.0

    def __init__(self, params):
        self.params = params

    def releases(self, ctx):
        """One Gaussian release of the mean (sensitivity 1, σ/Δ = sigma)."""
        import dp_accounting

        from dpkit.accounting import DpGuarantee

        if not self.requires_spend:
            return []
        return [dpkit.Release("mean", DpGuarantee(dp_accounting.GaussianDpEvent(self.params.sigma)),
                              "mean", unit="send")]

    def noisy_mean(self, ctx):
        return ctx.model.vectors.mean(0) + self.params.sigma * torch.randn(
            ctx.model.dim, generator=ctx.noise_generator("noise"))

    def run(self, ctx):
        """Send the noisy mean (its server keeps it)."""
        from dpkit import DefenseResult
        from dpkit.contract.releases import declare_releases

        declare_releases(self, ctx)
        noisy = self.noisy_mean(ctx)
        if self.requires_spend:
            ctx.wire.send("mean", noisy)
        return DefenseResult({"norm": float(noisy.norm())})


class SilentDefense(NoisyMeanDefense):
    """Releases without recording a spend."""

    requires_spend = False


class PublicSeedDefense(NoisyMeanDefense):
    """Draws its release noise from the seed alone, which the server could regenerate."""

    def noisy_mean(self, ctx):
        return ctx.model.vectors.mean(0) + self.params.sigma * torch.randn(
            ctx.model.dim, generator=ctx.generator("noise"))


class UndeclaredUploadDefense(NoisyMeanDefense):
    """Also sends the labels, a tensor no release covers."""

    def run(self, ctx):
        ctx.wire.send("labels", torch.tensor([0, 1, 1, 0]))
        return super().run(ctx)


class UnplannedSpendDefense(NoisyMeanDefense):
    """Spends once more inside run(): its plan (releases only) under-states the run."""

    def run(self, ctx):
        import dp_accounting

        from dpkit.accounting import DpGuarantee

        result = super().run(ctx)
        ctx.ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(1.0)), "extra")
        return result


class TestNoisyMeanDefenseContract(DefenseContract):
    defense = NoisyMeanDefense
    params = {"sigma": 2.0}
    invalid_params = [{"sigma": "x"}]


def _contract(defense_cls):
    class Contract(DefenseContract):
        defense = defense_cls
        params = {"sigma": 2.0}
    return Contract()


def test_defense_contract_catches_a_missing_spend():
    with pytest.raises(AssertionError, match="without a ledger spend"):
        _contract(SilentDefense).test_run_reports_metrics_and_spends()


def test_defense_contract_catches_noise_the_server_could_regenerate():
    with pytest.raises(AssertionError, match="ctx.noise_generator"):
        _contract(PublicSeedDefense).test_release_noise_comes_from_the_run_secret()


def test_defense_contract_catches_an_undeclared_upload():
    with pytest.raises(AssertionError, match="labels"):
        _contract(UndeclaredUploadDefense).test_every_upload_is_declared()


def test_defense_contract_catches_a_plan_that_differs_from_the_run():
    with pytest.raises(AssertionError):
        _contract(UnplannedSpendDefense).test_plan_equals_run()


def test_same_distribution_reads_float_rounding_as_one_value_and_nothing_larger():
    """A mix of identical rows on another device differs in the last bits (CUDA's obfuslm_table):
    the same value; a shift far above float32 rounding, or real noise, is not."""
    from dpkit.testing import same_distribution

    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    exact = x.repeat(200, 1)
    rounded = exact + 1e-7 * torch.randn(exact.shape, generator=torch.Generator().manual_seed(1))
    assert same_distribution(exact, rounded, x)
    assert not same_distribution(exact, rounded + 1e-3, x)
    assert not same_distribution(exact, exact + torch.randn(exact.shape), x)
