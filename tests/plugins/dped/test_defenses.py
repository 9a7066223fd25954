"""End-to-end runs of DPED's baselines on tiny data, DP-SGD's accountant, one real-data run."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from dpkit_dped.references import DpedNonPrivate, DpedPublic
from dpkit_dped.dpsgd import DpedDpsgd, train_dpsgd
from opacus.accountants import RDPAccountant

import dpkit.contract.plugins
from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext
from dpkit.boundary.session import connector

from .conftest import SMALL, TEACHER
from dpkit.contract.plugins import get_registry


def test_opacus_accountant_agrees_with_dpkit_ledger():
    gen = torch.Generator().manual_seed(0)
    n, pairs, vocab = 200, 6, 30
    centers, contexts = torch.randint(0, vocab, (n, pairs)), torch.randint(0, vocab, (n, pairs))
    defense = DpedDpsgd(DpedDpsgd.Params.model_validate(
        {**SMALL, "target_epsilon": 4.0, "sampling_rate": 0.05, "steps": 60}))
    z = defense.noise_multiplier(1e-5, "rdp")
    ledger = Ledger(1e-5, "rdp")
    for guarantee, label, count in defense.spends_for(z):
        ledger.spend(guarantee, label=label, count=count)
    opacus = RDPAccountant()
    train_dpsgd(centers, contexts, torch.ones(n, pairs), torch.full((vocab,), 1 / vocab), dim=4,
                negatives=2, noise_multiplier=z, max_grad_norm=1.0, sampling_rate=0.05, steps=60,
                lr=0.01, generator=gen, opacus_accountant=opacus)
    assert opacus.history == [(z, 0.05, 60)]  # (noise multiplier, sample rate, steps)
    assert opacus.get_epsilon(1e-5) == pytest.approx(ledger.epsilon(), rel=1e-3)
    assert ledger.epsilon() <= 4.0


def test_dpsgd_run_records_its_steps_and_stays_under_target(make_ctx):
    ctx = make_ctx()
    d = DpedDpsgd(DpedDpsgd.Params.model_validate({**SMALL, "target_epsilon": 2.0, "steps": 20,
                                                    "sampling_rate": 0.1, "pairs_per_doc": 8}))
    metrics = d.run(ctx).metrics
    assert [s.count for s in ctx.ledger.spends] == [20]
    assert ctx.ledger.epsilon() <= 2.0
    assert math.isfinite(metrics["perplexity"]) and metrics["noise_multiplier"] > 0


def test_nonprivate_and_public_models_learn_topics(make_ctx):
    ctx = make_ctx()
    metrics = DpedNonPrivate(DpedNonPrivate.Params.model_validate(SMALL)).run(ctx).metrics
    assert math.isinf(ctx.ledger.epsilon())
    assert metrics["topic_accuracy"] > 0.6  # chance is 1/3
    assert metrics["quintile5_cos"] == pytest.approx(1.0, abs=1e-4)  # reference is itself
    public_ctx = make_ctx()
    public = DpedPublic(DpedPublic.Params.model_validate(SMALL))
    planned = public.planned_spends(SimpleNamespace(delta=1e-5, accountant="rdp"))
    public.run(public_ctx)
    assert [(s.guarantee, s.label, s.count) for s in public_ctx.ledger.spends] == planned
    assert public_ctx.ledger.epsilon() == 0.0


def test_nonprivate_on_real_catalogue_sources(tmp_path):
    registry = dpkit.contract.plugins.get_registry()
    data = registry.build("dataset", "20newsgroups", {"max_examples": 150}).load()
    ctx = RunContext(connect=connector("inprocess"), dataset=data, model=None, device=torch.device("cpu"), seed=0,
                     ledger=Ledger(1e-5), registry=registry, cache_dir=tmp_path)
    params = DpedNonPrivate.Params.model_validate({
        "public_data_params": {"max_examples": 150}, "topic_data_params": {"max_examples": 150},
        "vocab_size": 400, "dim": 16, "epochs": 1, "heldout_pairs": 2000})
    metrics = DpedNonPrivate(params).run(ctx).metrics
    assert metrics["wordsim353_coverage"] > 0 and metrics["analogy_questions"] > 0
    assert all(math.isfinite(metrics[k]) for k in ("perplexity", "topic_accuracy"))


def test_public_init_runs_record_curves_and_the_nonprivate_twin_spends_infinity(make_ctx):
    from dpkit_dped.defenses import DpedDefense
    from dpkit_dped.dpsgd import DpedNonPrivateSgd

    sgd = {**SMALL, "init": "public", "steps": 30, "sampling_rate": 0.2, "pairs_per_doc": 8}
    ctx = make_ctx()
    metrics = DpedNonPrivateSgd(DpedNonPrivateSgd.Params.model_validate(sgd)).run(ctx).metrics
    assert math.isinf(ctx.ledger.epsilon()) and metrics["steps"] == 30
    ctx = make_ctx()
    result = DpedDpsgd(DpedDpsgd.Params.model_validate(
        {**sgd, "target_epsilon": 4.0, "steps_by_epsilon": {4.0: 12}})).run(ctx)
    assert [s.count for s in ctx.ledger.spends] == [12]  # σ calibrated for the steps run
    assert [c["component"] for c in result.training_curves] == ["DP-SGD skip-gram", "public skip-gram"]
    assert result.metrics["converged"] in (0.0, 1.0) and math.isfinite(result.metrics["val_loss_final"])
    ctx = make_ctx()
    student = DpedDefense(DpedDefense.Params.model_validate(
        {**TEACHER, "student_init": "public", "noiseless": True, "threshold_votes": 0.0})).run(ctx)
    assert student.training_curves[0]["component"] == "student"
    assert len(student.training_curves[0]["steps"]) == TEACHER["student_epochs"]
    ctx = make_ctx()  # targets shrunk to the public model's: nothing to fit, the curve says so
    quiet = DpedDefense(DpedDefense.Params.model_validate(
        {**TEACHER, "student_init": "public", "target_epsilon": 1.0})).run(ctx)
    assert quiet.training_curves[0]["steps"] == [0]
    assert quiet.training_curves[0]["solver_converged"] and quiet.metrics["converged"] == 1.0


def test_the_dpsgd_audit_trains_the_steps_it_charges(monkeypatch):
    """Under steps_by_epsilon, steps and step_count() differ: the audit must train and charge the
    same number."""
    import dpkit_dped.audit as audit

    from dpkit.audit import audit_defense

    trained, charged = [], []
    real_train, real_record = audit.train_dpsgd, audit.record
    monkeypatch.setattr(audit, "train_dpsgd",
                        lambda *a, **k: trained.append(k["steps"]) or real_train(*a, **k))
    monkeypatch.setattr(audit, "record",
                        lambda ctx, spends: charged.extend(n for _, _, n in spends)
                        or real_record(ctx, spends))
    params = {"target_epsilon": 2.0, "steps": 40, "steps_by_epsilon": {2.0: 7},
              "sampling_rate": 0.05, "dim": 4, "pairs_per_doc": 2}
    audit_defense("dped_dpsgd", params, canaries=20, seed=0, registry=get_registry())
    assert trained == charged == [7]


def test_dpsgd_floor_trains_on_public_documents_and_spends_nothing(make_ctx, monkeypatch):
    import dpkit_dped.dpsgd as dpsgd
    from dpkit_dped.pipeline import prepare

    seen = []
    real = dpsgd.train_dpsgd_documents
    monkeypatch.setattr(dpsgd, "train_dpsgd_documents",
                        lambda tokens, *a, **k: seen.append((len(tokens), k["sampling_rate"],
                                                             k["noise_multiplier"]))
                        or real(tokens, *a, **k))
    params = {**SMALL, "init": "public", "target_epsilon": 4.0, "steps_by_epsilon": {4.0: 6},
              "sampling_rate": 0.1, "pairs_per_doc": 4}
    ctx = make_ctx()
    metrics = dpsgd.DpedPublicSgd(dpsgd.DpedPublicSgd.Params.model_validate(params)).run(ctx).metrics
    assert ctx.ledger.epsilon() == 0.0 and metrics["steps"] == 6
    private = make_ctx()
    DpedDpsgd(DpedDpsgd.Params.model_validate(params)).run(private)
    setup = prepare(private, DpedDpsgd.Params.model_validate(params))
    (n_floor, q_floor, z_floor), (n_private, q_private, z_private) = seen
    assert n_floor == len(setup.public_texts) and n_private == len(setup.private_texts)
    assert z_floor == z_private  # the private run's noise multiplier, on public documents
    assert q_floor * n_floor == pytest.approx(q_private * n_private)  # same expected batch


# DPED's and PATE's plan, planned spends and declarations (the fast tests mutation.toml lists)

def test_a_run_takes_delta_and_accountant_from_its_privacy_settings_else_its_ledger():
    from dpkit_dped.defenses import privacy_settings

    stated = SimpleNamespace(privacy=SimpleNamespace(delta="1e-7", accountant="pld"),
                             ledger=Ledger(1e-6, "rdp"))
    assert privacy_settings(stated) == (1e-7, "pld")
    assert privacy_settings(SimpleNamespace(privacy=None, ledger=Ledger(1e-6, "pld"))) == (1e-6, "pld")
    assert privacy_settings(SimpleNamespace(privacy=None, ledger=object())) == (1e-5, "rdp")


def test_record_puts_every_planned_spend_on_the_ledger():
    from dpkit_dped.defenses import DpedDefense, record

    defense = DpedDefense(DpedDefense.Params.model_validate(TEACHER))
    spends = defense.planned_spends(SimpleNamespace(delta=1e-5, accountant="rdp"))
    ctx = SimpleNamespace(ledger=Ledger(1e-5, "rdp"))
    record(ctx, spends)
    assert [(s.guarantee, s.label, s.count) for s in ctx.ledger.spends] == spends
    assert 0.98 * 2.0 <= ctx.ledger.epsilon() <= 2.0  # TEACHER's target ε


@pytest.mark.parametrize("name", ["dped", "dped_pate"])
def test_the_plan_is_calibrated_once_per_delta_and_accountant(name, monkeypatch):
    import dpkit_dped.defenses as defenses

    calls = []
    monkeypatch.setattr(defenses, "calibrate", lambda *args: calls.append(args) or object())
    cls = {"dped": defenses.DpedDefense, "dped_pate": defenses.DpedPate}[name]
    defense = cls(cls.Params.model_validate(TEACHER))
    keys = [(1e-5, "rdp"), (1e-7, "rdp"), (1e-5, "pld"), (1e-5, "rdp"), (1e-7, "rdp")]
    plans = [defense.noise_plan(*key) for key in keys]
    assert calls == [(defense.params, name == "dped", *key) for key in keys[:3]]
    assert len({id(p) for p in plans[:3]}) == 3 and plans[3:] == [plans[0], plans[1]]


@pytest.mark.parametrize("name", ["dped", "dped_pate"])
def test_the_planned_spends_and_declared_releases_are_the_plan_at_the_runs_settings(name):
    """At δ = 1e-8 the plan spends the target at that δ, and the run declares exactly those
    entries (not the plan of another δ or accountant)."""
    from dpkit_dped.defenses import DpedDefense, DpedPate
    from dpkit_dped.plans import calibrate

    cls = {"dped": DpedDefense, "dped_pate": DpedPate}[name]
    defense = cls(cls.Params.model_validate(TEACHER))
    privacy = SimpleNamespace(delta=1e-8, accountant="rdp")
    spends = defense.planned_spends(privacy)
    assert spends == calibrate(defense.params, name == "dped", 1e-8, "rdp").spends()
    ledger = Ledger(1e-8, "rdp")
    for guarantee, label, count in spends:
        ledger.spend(guarantee, label=label, count=count)
    assert 0.98 * 2.0 <= ledger.epsilon() <= 2.0
    assert len(spends) == (3 if name == "dped" else 2)
    for ctx in (SimpleNamespace(privacy=privacy, ledger=Ledger(1e-5, "rdp")),
                SimpleNamespace(privacy=None, ledger=Ledger(1e-8, "rdp"))):
        releases = defense.releases(ctx)
        assert [(r.guarantee, r.label, r.count) for r in releases] == spends
        assert [r.name for r in releases] == (["threshold", "answers"]
                                              + (["hidden_means"] if name == "dped" else []))
