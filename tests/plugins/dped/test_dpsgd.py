"""DP-SGD's components in detail (dpkit_dped/dpsgd.py): the noise multiplier against an
independent accountant at the steps run, the ledger entries and releases each component declares
(events, labels, counts, reasons), and what each run hands the trainer (z, C, q, steps, the
recipe, the documents, the noise stream) and reports. Kills the mutants the law and plan tests
cannot see (tools/mutation.toml)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import dp_accounting
import pytest
import torch

from dpkit import DpGuarantee, NoGuarantee
from dpkit.accounting import Ledger
from dpkit.boundary.session import connector
from dpkit.contract.context import RunContext
from dpkit.contract.registry import Registry
from dpkit.release.declaration import Release
from dpkit_dped import dpsgd
from dpkit_dped.dpsgd import DpedDpsgd, DpedNonPrivateSgd, DpedPublicSgd, gradient_releases
from dpkit_dped.pipeline import prepare
from dpkit_dped.releases import GRADIENT
from dpkit_dped.sgd_server import INIT_STREAM, random_start

from .conftest import SMALL, TinyPublic, TinyTopics, tiny_dataset

RECIPE = {**SMALL, "steps": 30, "sampling_rate": 0.2, "pairs_per_doc": 4}
SGD = {**RECIPE, "target_epsilon": 3.0, "steps_by_epsilon": {3.0: 4}, "max_grad_norm": 0.7}
PRIVACY = SimpleNamespace(delta=1e-5, accountant="rdp")


def independent_epsilon(z: float, rate: float, steps: int, delta: float, accountant: str) -> float:
    acc = (dp_accounting.rdp.RdpAccountant() if accountant == "rdp"
           else dp_accounting.pld.PLDAccountant())
    acc.compose(dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(z)), steps)
    return acc.get_epsilon(delta)


def test_the_noise_multiplier_spends_the_target_over_the_steps_run():
    defense = DpedDpsgd(DpedDpsgd.Params.model_validate(SGD))
    for delta in (1e-5, 1e-7):
        z = defense.noise_multiplier(delta, "rdp")
        eps = independent_epsilon(z, 0.2, 4, delta, "rdp")  # 4 = steps_by_epsilon[3.0]
        assert 0.98 * 3.0 <= eps <= 3.0, (delta, z, eps)
    assert defense.noise_multiplier(1e-7, "rdp") > defense.noise_multiplier(1e-5, "rdp")


def test_the_noise_multiplier_is_calibrated_once_per_delta_and_accountant(monkeypatch):
    """A stand-in calibrator (the real one is slow under PLD) that also checks the event."""
    calls = []

    def calibrate(event, target, delta, accountant):
        assert event(1.5) == dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(1.5)), 4)
        calls.append((target, delta, accountant))
        return len(calls) + (delta, accountant).__hash__() % 7 / 10

    monkeypatch.setattr(dpsgd, "calibrate_noise", calibrate)
    defense = DpedDpsgd(DpedDpsgd.Params.model_validate(SGD))
    keys = [(1e-5, "rdp"), (1e-6, "rdp"), (1e-5, "pld"), (1e-5, "rdp"), (1e-5, "pld")]
    z = [defense.noise_multiplier(*key) for key in keys]
    assert calls == [(3.0, 1e-5, "rdp"), (3.0, 1e-6, "rdp"), (3.0, 1e-5, "pld")]
    assert len(set(z[:3])) == 3 and z[3:] == [z[0], z[2]]


def test_a_step_is_one_poisson_sampled_gaussian_charged_steps_times():
    defense = DpedDpsgd(DpedDpsgd.Params.model_validate(SGD))
    step = dp_accounting.PoissonSampledDpEvent(0.2, dp_accounting.GaussianDpEvent(1.3))
    assert defense.spends_for(1.3) == [
        (DpGuarantee(step), "DP-SGD step, one document per sample (C=0.7)", 4)]
    z = defense.noise_multiplier(1e-5, "rdp")
    assert defense.planned_spends(PRIVACY) == defense.spends_for(z)


def _ctx(messages: list | None = None, seed: int = 0) -> RunContext:
    reg = Registry()
    reg.add("dataset", TinyPublic, "tests")
    reg.add("dataset", TinyTopics, "tests")
    return RunContext(connect=connector("inprocess"), dataset=tiny_dataset("tiny_private", 120, 30, 0),
                      model=None, device=torch.device("cpu"), seed=seed, ledger=Ledger(1e-5, "rdp"),
                      registry=reg, progress=None if messages is None else messages.append)


def test_each_component_declares_one_gradient_send_per_step_under_its_entry():
    ctx = _ctx()
    private = DpedDpsgd(DpedDpsgd.Params.model_validate(SGD))
    (guarantee, label, count), = private.planned_spends(PRIVACY)
    assert private.releases(ctx) == [Release(GRADIENT, guarantee, label, count, unit="send")]
    twin = DpedNonPrivateSgd(DpedNonPrivateSgd.Params.model_validate(RECIPE | {"steps": 9}))
    reason = "non-private baseline: the DP-SGD recipe on the private corpus without noise"
    assert twin.planned_spends(PRIVACY) == [(NoGuarantee(reason), "non-private SGD skip-gram", 1)]
    assert twin.releases(ctx) == [Release(GRADIENT, NoGuarantee(reason), "non-private SGD skip-gram",
                                          1, unit="send")]
    floor = DpedPublicSgd(DpedPublicSgd.Params.model_validate(SGD))
    nothing = DpGuarantee(dp_accounting.NoOpDpEvent())
    label = "DP-SGD recipe on the public corpus (no private data)"
    assert floor.planned_spends(PRIVACY) == [(nothing, label, 1)]
    assert floor.releases(ctx) == [Release(GRADIENT, nothing, label, 1, covers=4, unit="send")]
    with pytest.raises(ValueError):
        gradient_releases(private.spends_for(1.0) * 2)


def _trained(monkeypatch) -> list[dict]:
    """What each run hands the trainer (keyword arguments plus the documents and the noise
    generator's state before its first draw, and the model it returned) and the evaluator (whose
    metrics are not under test here: it returns a marker)."""
    seen = []
    real = dpsgd.train_dpsgd_documents

    def spy(tokens, lengths, neg_probs, **kwargs):
        seen.append(dict(kwargs, tokens=tokens, lengths=lengths, neg_probs=neg_probs,
                         state=kwargs["generator"].get_state().clone()))
        seen[-1]["model"] = real(tokens, lengths, neg_probs, **kwargs)
        return seen[-1]["model"]

    def evaluate(ctx, setup, model, p):
        seen[-1]["evaluated"] = (ctx, setup, model, p)
        return {"evaluated": 1.0}

    monkeypatch.setattr(dpsgd, "train_dpsgd_documents", spy)
    monkeypatch.setattr(dpsgd, "evaluate", evaluate)
    return seen



class _Handed(Exception):
    """The spy's stop once the trainer's inputs are seen (what it does with them is sgd.py's)."""


def _handed_to_the_trainer(monkeypatch, device: str) -> dict:
    """The documents, negative law, validation pairs and generator a cell on ``device`` hands
    the DP-SGD trainer."""
    seen = {}

    def spy(tokens, lengths, neg_probs, **kwargs):
        seen.update(tokens=tokens, lengths=lengths, neg_probs=neg_probs,
                    validation=kwargs["validation"], generator=kwargs["generator"])
        raise _Handed

    monkeypatch.setattr(dpsgd, "train_dpsgd_documents", spy)
    ctx = _ctx()
    ctx.device = torch.device(device)
    with pytest.raises(_Handed):
        dpsgd.train_on_private(ctx, DpedDpsgd.Params.model_validate(SGD), 4, 1.0, 0.7)
    return seen


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_cell_hands_the_trainer_its_documents_and_laws_on_the_generators_device(monkeypatch):
    """The trainer samples documents and negatives with the cell's CUDA generator: the documents,
    their lengths, the negative law and the validation pairs are the CPU cell's, on the GPU."""
    on_cuda, on_cpu = (_handed_to_the_trainer(monkeypatch, "cuda"),
                       _handed_to_the_trainer(monkeypatch, "cpu"))
    assert on_cuda["generator"].device.type == "cuda"
    for name in ("tokens", "lengths", "neg_probs"):
        assert on_cuda[name].device.type == "cuda", name
        torch.testing.assert_close(on_cuda[name].cpu(), on_cpu[name])
    assert [v.device.type for v in on_cuda["validation"]] == ["cuda"] * len(on_cpu["validation"])
    assert all(torch.equal(a.cpu(), b) for a, b in zip(on_cuda["validation"], on_cpu["validation"]))

def _evaluated(k: dict, ctx, params) -> None:
    run_ctx, setup, model, p = k["evaluated"]
    assert run_ctx is ctx and p is params
    # the evaluator scores the server's model, equal to the client's copy, with its curve
    assert model is not k["model"] and model.curve is k["model"].curve
    assert torch.equal(model.vectors, k["model"].vectors)
    assert torch.equal(model.out_vectors, k["model"].out_vectors)
    assert setup.private_texts == prepare(_ctx(), params).private_texts


def _negative_law(setup) -> torch.Tensor:
    counts = torch.tensor(setup.vocab.counts, dtype=torch.float64) ** 0.75
    return counts / counts.sum()


def test_dpsgd_trains_at_its_calibrated_noise_on_the_private_documents(monkeypatch):
    seen, messages = _trained(monkeypatch), []
    params = DpedDpsgd.Params.model_validate(
        SGD | {"optimizer": "adam", "momentum": 0.5, "lr": 0.03, "clipping": "opacus",
               "window": 3, "negative": 3, "dim": 6, "max_doc_len": 30})
    ctx, defense = _ctx(messages), DpedDpsgd(params)
    result = defense.run(ctx)
    z = defense.noise_multiplier(1e-5, "rdp")
    (k,) = seen
    assert (k["noise_multiplier"], k["max_grad_norm"], k["sampling_rate"], k["steps"]) == \
        (z, 0.7, 0.2, 4)
    assert (k["clipping"], k["optimizer"], k["momentum"], k["lr"]) == ("opacus", "adam", 0.5, 0.03)
    assert (k["window"], k["negatives"], k["dim"], k["pairs_per_doc"]) == (3, 3, 6, 4)
    # the random start is drawn from the server's seed, so the server starts from the same table
    start = random_start(len(prepare(_ctx(), params).vocab), 6, ctx.server_numpy_seed(INIT_STREAM))
    assert torch.equal(k["init"].vectors, start.vectors) and not k["init"].out_vectors.any()
    setup = prepare(_ctx(), params)
    assert len(k["tokens"]) == len(setup.private_texts) and k["tokens"].shape[1] == 30
    assert int(k["lengths"].max()) <= 30
    assert torch.allclose(k["neg_probs"].double(), _negative_law(setup))
    assert all(torch.equal(a, b) for a, b in zip(k["validation"], setup.validation))
    assert torch.equal(k["state"], _ctx().noise_generator("dped-dpsgd").get_state())
    assert ctx.wire.units[GRADIENT] == 4  # each step's gradient sent once
    assert [(s.label, s.count) for s in ctx.ledger.spends] == [
        ("DP-SGD step, one document per sample (C=0.7)", 4)]
    _evaluated(k, ctx, params)
    metrics = result.metrics
    assert (metrics["evaluated"], metrics["target_epsilon"], metrics["noise_multiplier"],
            metrics["steps"]) == (1.0, 3.0, z, 4.0)
    assert f"dped_dpsgd: 4 DP-SGD steps, q=0.2, z={z:.3f}" in messages
    assert [c["component"] for c in result.training_curves] == ["DP-SGD skip-gram"]


def test_a_public_start_is_handed_to_the_trainer_and_its_curve_reported(monkeypatch):
    seen = _trained(monkeypatch)
    result = DpedDpsgd(DpedDpsgd.Params.model_validate(SGD | {"init": "public"})).run(_ctx())
    assert seen[0]["init"] is not None and seen[0]["init"].vectors.shape[1] == SGD["dim"]
    assert [c["component"] for c in result.training_curves] == ["DP-SGD skip-gram",
                                                                 "public skip-gram"]


def test_the_nonprivate_twin_trains_without_clipping_or_noise(monkeypatch):
    seen, messages = _trained(monkeypatch), []
    ctx = _ctx(messages)
    params = DpedNonPrivateSgd.Params.model_validate(RECIPE | {"steps": 3, "init": "public"})
    result = DpedNonPrivateSgd(params).run(ctx)
    (k,) = seen
    assert (k["noise_multiplier"], k["max_grad_norm"], k["steps"], k["clipping"]) == \
        (0.0, math.inf, 3, "sparse")
    assert k["sampling_rate"] == 0.2 and len(k["tokens"]) == len(prepare(_ctx(), params).private_texts)
    assert math.isinf(ctx.ledger.epsilon()) and ctx.wire.units[GRADIENT] == 3
    _evaluated(k, ctx, params)
    assert (result.metrics["evaluated"], result.metrics["steps"]) == (1.0, 3.0)
    assert k["init"] is not None
    assert [c["component"] for c in result.training_curves] == ["DP-SGD skip-gram",
                                                                 "public skip-gram"]
    assert "dped_nonprivate_sgd: 3 SGD steps, q=0.2" in messages


@pytest.mark.parametrize("rate, recipe", [(0.2, {}), (0.9, {"clipping": "opacus", "init": "public"})])
def test_the_floor_trains_on_public_documents_at_the_private_expected_batch(monkeypatch, rate,
                                                                            recipe):
    """q·n is kept: q_public = q·n_private / n_public, capped at 1 (0.9 · 120 / 80 > 1); the rest
    of the recipe is the private run's."""
    seen, messages = _trained(monkeypatch), []
    params = DpedPublicSgd.Params.model_validate(SGD | {"sampling_rate": rate} | recipe)
    ctx, floor = _ctx(messages), DpedPublicSgd(params)
    result = floor.run(ctx)
    setup = prepare(_ctx(), params)
    z = floor.noise_multiplier(1e-5, "rdp")  # the private run's: DpedDpsgd's calibration
    (k,) = seen
    assert len(k["tokens"]) == len(setup.public_texts) != len(setup.private_texts)
    assert k["sampling_rate"] == pytest.approx(
        min(1.0, rate * len(setup.private_texts) / len(setup.public_texts)))
    assert (k["noise_multiplier"], k["max_grad_norm"], k["steps"]) == (z, 0.7, 4)
    assert k["clipping"] == params.clipping  # a random start has a zero output table
    assert bool(k["init"].out_vectors.any()) == (params.init == "public")
    assert [c["component"] for c in result.training_curves] == ["DP-SGD skip-gram"] + (
        ["public skip-gram"] if params.init == "public" else [])
    assert ctx.ledger.epsilon() == 0.0 and ctx.wire.units[GRADIENT] == 4
    _evaluated(k, ctx, params)
    metrics = result.metrics
    assert (metrics["evaluated"], metrics["target_epsilon"], metrics["noise_multiplier"],
            metrics["steps"]) == (1.0, 3.0, z, 4.0)
    assert f"dped_public_sgd: 4 steps on public documents, z={z:.3f}" in messages
