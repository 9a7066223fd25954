"""With ``denoiser.patience`` the epoch cap is not part of the cache key: a denoiser that stopped
before a cap is exactly the one any higher cap trains, so raising the cap reuses it, and one that
ran to its cap is retrained for another."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from dpkit.ml.training import TrainingCurve
from dpkit_snd.training import TrainPlan


def _curve(epochs: int, stopped: bool | None) -> TrainingCurve:
    curve = TrainingCurve("snd denoiser")
    for step in range(1, epochs + 1):
        curve.add(step, 1.0 / step, 1.0 / step)
    curve.stopped_early = stopped
    return curve


@pytest.mark.parametrize(("cap", "epochs", "stopped", "expected"), [
    (10, 6, True, True),     # stopped at 6: any cap ≥ 6 trains the same model
    (10, 10, True, True),    # stopped exactly at the cap
    (10, 12, True, False),   # stopped at 12: a cap of 10 cuts it earlier
    (10, 10, False, True),   # ran to this very cap
    (10, 8, False, False),   # ran to a lower cap: more epochs would follow
    (10, 12, False, False),  # ran to a higher cap
])
def test_reproduces_with_patience(cap, epochs, stopped, expected):
    assert TrainPlan(epochs=cap, batch_size=8, lr=1e-3, patience=2).reproduces(
        _curve(epochs, stopped)) is expected


def test_without_patience_the_cap_stays_in_the_key():
    plan = TrainPlan(epochs=3, batch_size=8, lr=1e-3)
    assert plan.key_fields() == [3, 8, 1e-3] and plan.reproduces(_curve(7, None))
    assert TrainPlan(epochs=3, batch_size=8, lr=1e-3, patience=1).key_fields() == [8, 1e-3]


def _run(registry, ctx, raw: dict, epochs: int):
    """Run the snd defense with the denoiser capped at ``epochs``: (metrics, its curve, weights)."""
    params = {**raw, "denoiser": {**raw["denoiser"], "epochs": epochs}}
    result = registry.build("defense", "snd", params).run(ctx)
    curve = TrainingCurve.from_dict(result.training_curves[1])
    weights = load_file(str(next((ctx.cache_dir / "snd_denoiser").rglob("*.safetensors"))))
    return result.metrics, curve, weights


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_stopped_denoiser_serves_every_higher_cap(registry, make_ctx, small, tmp_path):
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]],
           "denoiser": {**denoiser, "lr": 3e-2, "patience": 1}}
    first, curve, weights = _run(registry, make_ctx(cache=tmp_path / "a"), raw, 8)
    assert curve.stopped_early and curve.steps[-1] < 8  # it did stop before the cap
    again, same_curve, _ = _run(registry, make_ctx(cache=tmp_path / "a"), raw, 20)
    assert again["denoiser_cached"] == 1.0 and same_curve.to_dict() == curve.to_dict()
    # ... and it is what a fresh training under the higher cap gives, bit for bit
    fresh, fresh_curve, fresh_weights = _run(registry, make_ctx(cache=tmp_path / "b"), raw, 20)
    assert fresh["denoiser_cached"] == 0.0 and fresh_curve.to_dict() == curve.to_dict()
    assert _same(fresh_weights, weights)
    assert fresh["mse"] == first["mse"] and fresh["accuracy"] == first["accuracy"]


def test_a_denoiser_that_ran_to_its_cap_is_retrained_for_another(registry, make_ctx, small,
                                                                 tmp_path):
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]],
           "denoiser": {**denoiser, "lr": 1e-3, "patience": 5}}
    _, two, _ = _run(registry, make_ctx(cache=tmp_path / "a"), raw, 2)
    assert not two.stopped_early and two.steps == [1, 2]
    metrics, three, weights = _run(registry, make_ctx(cache=tmp_path / "a"), raw, 3)
    assert metrics["denoiser_cached"] == 0.0 and three.steps == [1, 2, 3]
    assert three.val_loss[:2] == two.val_loss  # the first two epochs do not depend on the cap
    metrics, cached, _ = _run(registry, make_ctx(cache=tmp_path / "a"), raw, 3)
    assert metrics["denoiser_cached"] == 1.0 and cached.to_dict() == three.to_dict()
    _, _, fresh = _run(registry, make_ctx(cache=tmp_path / "b"), raw, 3)
    assert _same(fresh, weights)
