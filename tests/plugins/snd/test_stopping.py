"""Early stopping of the denoisers on their held-out *public* texts (``denoiser.patience``):
the best epoch's parameters come back, the private data plays no part, and a plan without
patience trains and is cached exactly as before."""

from __future__ import annotations

import importlib.util
import subprocess
import types
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from dpkit.data.types import TextDataset, TextSplit
from dpkit.base.errors import ParamsError
from dpkit.ml.training import TrainingCurve
from dpkit_snd import denoising
from dpkit_snd.client import SplitClient
from dpkit_snd.denoiser import ServerTokenDenoiser, SnDDenoiser
from dpkit_snd.training import (
    TrainPlan,
    _server_loss,
    _batches,
    _snd_loss,
    _validation_loss,
    cache_key,
    default_config,
    train_server,
    train_snd,
)

# A learning rate high enough that the tiny denoiser's held-out loss turns up within a few epochs.
FAST = {"epochs": 12, "batch_size": 16, "lr": 3e-2}
# The last commit before denoiser.patience existed: its cache keys must still be the keys.
BEFORE_PATIENCE = "82fd330"


def _quiet(_msg: str) -> None:
    pass


def _setup_tiny(tiny_model, registry, texts):
    client = SplitClient(tiny_model, 16)
    mech = registry.build("mechanism", "laplace_dx", {"eta": 150.0, "clip_bound": client.clip_bound})
    public, _ = texts(96, seed=3)
    return client, mech, public[:64], public[64:]


@pytest.mark.parametrize("kind", ["snd", "server"])
def test_stopping_keeps_the_best_epochs_parameters(tiny_model, registry, texts, kind):
    client, mech, train, val = _setup_tiny(tiny_model, registry, texts)
    build, fit, loss = {"snd": (SnDDenoiser, train_snd, _snd_loss),
                        "server": (ServerTokenDenoiser, train_server, _server_loss)}[kind]
    cfg = default_config(client, 32, 64, 2, 1)

    def trained(plan: TrainPlan):
        torch.manual_seed(0)
        model = build(cfg)
        curve = fit(model, client, train, [mech], plan, torch.Generator().manual_seed(0), _quiet,
                    validation=val, val_seed=1)
        return model, curve

    stopped, curve = trained(TrainPlan(**FAST, patience=1))
    assert curve.stopped_early, curve.val_loss  # the held-out loss did turn up (else: vacuous)
    assert curve.steps[-1] - curve.best_step == 1  # one epoch without improvement, then stop
    assert curve.val_loss[curve.steps.index(curve.best_step)] == min(curve.val_loss)
    plan = TrainPlan(**FAST)
    batches = client.batches(val, plan.batch_size) if kind == "server" else _batches(client, val, plan)
    kept = _validation_loss(stopped, loss, client, batches, [mech], 1)
    assert kept == pytest.approx(min(curve.val_loss), rel=1e-6)  # the best epoch is back
    # ... and it is exactly the model that trained for best_step epochs without stopping
    plain, plain_curve = trained(TrainPlan(**{**FAST, "epochs": curve.best_step}))
    for (name, a), (_, b) in zip(stopped.state_dict().items(), plain.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    assert plain_curve.val_loss == curve.val_loss[:curve.best_step]
    assert plain_curve.stopped_early is None and plain_curve.best_step is None
    assert TrainingCurve.from_dict(curve.to_dict()).stopped_early  # survives the cache metadata


def test_patience_that_never_triggers_trains_like_no_patience(tiny_model, registry, texts):
    client, mech, train, val = _setup_tiny(tiny_model, registry, texts)
    cfg = default_config(client, 32, 64, 2, 1)
    models, curves = [], []
    for patience in (None, 3):
        torch.manual_seed(0)
        model = SnDDenoiser(cfg)
        plan = TrainPlan(epochs=3, batch_size=16, lr=3e-3, patience=patience)
        curves.append(train_snd(model, client, train, [mech], plan,
                                torch.Generator().manual_seed(0), _quiet, val, 1))
        models.append(model)
    assert curves[1].val_loss == curves[0].val_loss and not curves[1].stopped_early
    assert curves[1].best_step == 3
    for a, b in zip(models[0].state_dict().values(), models[1].state_dict().values()):
        assert torch.equal(a, b)


def test_patience_needs_held_out_public_texts(tiny_model, registry, texts):
    client, mech, train, _ = _setup_tiny(tiny_model, registry, texts)
    model = SnDDenoiser(default_config(client, 32, 64, 2, 1))
    with pytest.raises(ValueError, match="none were held out"):
        train_snd(model, client, train, [mech], TrainPlan(**FAST, patience=2),
                  torch.Generator().manual_seed(0), _quiet)
    with pytest.raises(ValueError, match="patience"):
        TrainPlan(**FAST, patience=0)


def test_params_validate_patience(registry, small):
    params, denoiser = small
    base = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]]}
    for bad in (0, -1):
        with pytest.raises(ParamsError, match="patience"):
            registry.build("defense", "snd", {**base, "denoiser": {**denoiser, "patience": bad}})
    built = registry.build("defense", "snd_server_denoise",
                           {**base, "denoiser": {**denoiser, "patience": 2}})
    assert built.params.denoiser.patience == 2
    assert registry.build("defense", "snd", {**base, "denoiser": denoiser}).params.denoiser.patience \
        is None


def _fields(registry, ctx, name: str, raw: dict, module=denoising) -> dict:
    defense = registry.build("defense", name, raw)
    client = SplitClient(ctx.model, raw["max_tokens"])
    kind = "snd" if name == "snd" else "server"
    return module._setup(ctx, client, defense.params, defense._mechanism, kind)[-1]


def _module_before_patience() -> types.ModuleType:
    """``dpkit_snd/denoising.py`` as of :data:`BEFORE_PATIENCE`, loaded from git (skip if the
    checkout has no history)."""
    root = Path(denoising.__file__).resolve().parents[2]
    try:
        source = subprocess.run(["git", "show", f"{BEFORE_PATIENCE}:plugins/dpkit_snd/denoising.py"],
                                cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"commit {BEFORE_PATIENCE} is not in this checkout")
    spec = importlib.util.spec_from_loader("dpkit_snd._denoising_before_patience", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, "denoising@" + BEFORE_PATIENCE, "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("name", ["snd", "snd_server_denoise"])
def test_no_patience_keeps_the_cache_key_of_the_code_before_it(registry, make_ctx, small, name):
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]], "denoiser": denoiser}
    ctx = make_ctx()
    old = _fields(registry, ctx, name, raw, _module_before_patience())
    new = _fields(registry, ctx, name, raw)
    assert new == old and cache_key(new) == cache_key(old)
    two = _fields(registry, ctx, name, {**raw, "denoiser": {**denoiser, "patience": 2}})
    three = _fields(registry, ctx, name, {**raw, "denoiser": {**denoiser, "patience": 3}})
    # the patience is the only new field, and the epoch cap leaves the key (test_epoch_cap.py)
    assert two == {**old, "plan": old["plan"][1:], "patience": 2}
    assert len({cache_key(old), cache_key(two), cache_key(three)}) == 3


def _other_private_data(base: TextDataset, texts) -> TextDataset:
    """Different private texts and labels, same sizes and split names."""
    train_texts, train_labels = texts(len(base["train"].texts), seed=11)
    test_texts, test_labels = texts(len(base["test"].texts), seed=12)
    return TextDataset("generated_other", {"train": TextSplit(train_texts, train_labels),
                                           "test": TextSplit(test_texts, test_labels)},
                       label_names=base.label_names)


def test_stopping_never_reads_the_private_data(registry, make_ctx, small, texts, tmp_path):
    """Two private datasets, the same public text: the same stopped denoiser, bit for bit."""
    params, denoiser = small
    raw = {**params, "eta": 150.0, "eta_groups": [[100.0, 200.0]],
           "denoiser": {**denoiser, "epochs": 8, "lr": 3e-2, "patience": 1}}
    first = make_ctx(cache=tmp_path / "one")
    other = make_ctx(dataset=_other_private_data(first.dataset, texts), cache=tmp_path / "two")
    assert other.dataset["train"].texts != first.dataset["train"].texts
    results = [registry.build("defense", "snd", raw).run(ctx) for ctx in (first, other)]
    curves = [TrainingCurve.from_dict(r.training_curves[1]) for r in results]
    assert curves[0].component == "snd denoiser" and curves[0].stopped_early  # it did stop
    assert curves[0].to_dict() == curves[1].to_dict()
    for key in ("denoiser_epochs_trained", "denoiser_best_epoch", "denoiser_stopped_early"):
        assert results[0].metrics[key] == results[1].metrics[key]
    assert results[0].metrics["denoiser_epochs_trained"] == curves[0].steps[-1]
    weights = [load_file(str(next((ctx.cache_dir / "snd_denoiser").rglob("*.safetensors"))))
               for ctx in (first, other)]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name
    assert results[0].metrics["accuracy"] != results[1].metrics["accuracy"] or \
        results[0].metrics["mse"] != results[1].metrics["mse"]  # the private data did differ
    # the ledger holds the private uploads only: training and stopping on public text spend nothing
    assert {s.guarantee.eta for s in first.ledger.spends} == {150.0}
    assert len(first.ledger.spends) == 1
