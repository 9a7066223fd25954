"""Ledger behaviour: notions, NoGuarantee, ceilings, remaining, summary, JSON and table."""

import json
import math

import dp_accounting
import pytest
import torch

from dpkit.accounting import (
    K_COMPOSITION_NOTE,
    DpGuarantee,
    KAnonymityGuarantee,
    Ledger,
    MetricDpGuarantee,
    NoGuarantee,
    dpsgd_event,
    epsilon_of,
    table_diameter,
)
from dpkit.base.errors import AccountingError, BudgetExceededError

GAUSS = DpGuarantee(dp_accounting.GaussianDpEvent(5.0), "noisy mean")


def test_empty_ledger():
    ledger = Ledger()
    assert ledger.epsilon() == 0.0 and ledger.delta(1.0) == 0.0 and ledger.eta() == 0.0
    assert ledger.summary() == {} and len(ledger) == 0
    assert "(no spends)" in ledger.table()


def test_dp_counts_and_delta_of_epsilon():
    ledger = Ledger()
    ledger.spend(GAUSS, "teacher votes", count=3)
    expected = epsilon_of(dp_accounting.SelfComposedDpEvent(GAUSS.event, 3), 1e-5)
    assert ledger.epsilon() == pytest.approx(expected, rel=1e-12)
    assert ledger.delta(ledger.epsilon()) == pytest.approx(1e-5, rel=1e-2)
    assert ledger.epsilon(1e-3) < ledger.epsilon()


def test_identical_events_are_grouped():
    ledger = Ledger()
    for _ in range(50):
        ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(5.0)), "step")
    ledger.spend(DpGuarantee(dp_accounting.LaplaceDpEvent(2.0)), "count")
    event = ledger.dp_event()
    assert isinstance(event, dp_accounting.ComposedDpEvent) and len(event.events) == 2
    assert event.events[0] == dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(5.0), 50)


def test_metric_dp_additive_and_document_epsilon():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(2.0, "l2", "glove"), "pass 1")
    ledger.spend(MetricDpGuarantee(3.0, "l2", "glove"), "pass 2", count=2)
    assert ledger.eta() == 8.0 and ledger.eta_per_token() == 5.0  # 3 releases in 2 passes
    assert ledger.summary() == {"eta": 8.0, "eta_per_token": 5.0}
    assert ledger.metric_epsilon([0.5, 0.25]) == pytest.approx(3.75)
    assert ledger.metric_epsilon(torch.tensor([[1.0, 0.0], [0.5, 0.5]])) == pytest.approx([5.0, 5.0])
    with pytest.raises(AccountingError, match="non-negative"):
        ledger.metric_epsilon([-1.0])


def test_metric_dp_of_different_spaces_do_not_add():
    ledger = Ledger()
    ledger.spend(MetricDpGuarantee(2.0, "l2", "glove"), "a")
    ledger.spend(MetricDpGuarantee(3.0, "l2", "bert"), "b")
    with pytest.raises(AccountingError, match="do not add up"):
        ledger.eta()
    assert ledger.eta(space="bert") == 3.0
    assert set(ledger.summary()) == {"eta[l2:glove:token]", "eta[l2:bert:token]",
                                     "eta_per_token[l2:glove]", "eta_per_token[l2:bert]"}


def test_table_diameter_matches_cdist_without_full_matrix():
    table = torch.randn(300, 7, generator=torch.Generator().manual_seed(0))
    assert table_diameter(table, chunk=64) == pytest.approx(float(torch.cdist(table, table).max()),
                                                            rel=1e-6)


def test_k_anonymity_min_k_and_summed_epsilon():
    ledger = Ledger()
    ledger.spend(KAnonymityGuarantee(10, 7, 0.02, 1.5), "cluster")
    ledger.spend(KAnonymityGuarantee(20, 12, 0.10, 0.5), "recluster", count=2)
    k = ledger.k_anonymity()
    assert (k.k_achieved, k.k_requested, k.share_below_k, k.epsilon) == (7, 10, 0.10, 2.5)
    assert k.note == K_COMPOSITION_NOTE and "no composition theorem" in ledger.table()
    assert ledger.summary() == {"k_achieved": 7.0, "k_requested": 10.0, "share_below_k": 0.10,
                                "anonymity_epsilon": 2.5}


def test_no_guarantee_makes_epsilon_infinite_and_keeps_reason():
    ledger = Ledger()
    ledger.spend(GAUSS, "ok")
    ledger.spend(NoGuarantee("noiseless rare-word threshold on private votes"), "threshold")
    assert ledger.epsilon() == math.inf and ledger.delta(10.0) == 1.0
    assert ledger.summary()["epsilon"] == math.inf
    assert ledger.no_guarantee_reasons == ["noiseless rare-word threshold on private votes"]
    assert "noiseless rare-word threshold" in ledger.table()
    data = json.loads(json.dumps(ledger.to_dict(), allow_nan=False))
    assert data["summary"]["epsilon"] == "inf"
    assert Ledger.from_dict(data).no_guarantee_reasons == ledger.no_guarantee_reasons


def test_ceiling_refuses_before_recording_with_message():
    ledger = Ledger(ceiling=1.0)
    ledger.spend(DpGuarantee(dpsgd_event(4.0, 0.01, 1000)), "train")
    before = ledger.to_dict()
    with pytest.raises(BudgetExceededError, match=r"'more'.*ε to .* ceiling ε = 1; remaining ε = 0\.69"):
        ledger.spend(DpGuarantee(dpsgd_event(1.0, 0.01, 10_000)), "more")
    assert ledger.to_dict() == before and len(ledger) == 1
    assert ledger.remaining()["epsilon"] == pytest.approx(1.0 - ledger.epsilon())
    with pytest.raises(BudgetExceededError, match="no valid guarantee"):
        ledger.spend(NoGuarantee("deterministic threshold"), "threshold")
    assert len(ledger) == 1


def test_ceiling_on_eta_and_anonymity():
    ledger = Ledger(ceiling={"eta": 10.0, "anonymity_epsilon": 1.0})
    ledger.spend(MetricDpGuarantee(4.0, space="glove"), "a", count=2)
    with pytest.raises(BudgetExceededError, match="remaining η = 2"):
        ledger.spend(MetricDpGuarantee(3.0, space="glove"), "b")
    ledger.spend(MetricDpGuarantee(9.0, space="other"), "c")  # η caps apply per space
    ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 1.0), "k")
    with pytest.raises(BudgetExceededError, match="anonymity ε"):
        ledger.spend(KAnonymityGuarantee(5, 5, 0.0, 0.01), "k2")
    assert ledger.remaining() == {"epsilon": math.inf, "eta": pytest.approx(1.0),
                                  "anonymity_epsilon": 0.0}


def test_float_rounding_at_ceiling_is_not_refused():
    ledger = Ledger(ceiling={"eta": 0.3})
    ledger.spend(MetricDpGuarantee(0.1), "a")
    ledger.spend(MetricDpGuarantee(0.2), "b")  # 0.1 + 0.2 rounds above 0.3
    assert ledger.remaining()["eta"] == 0.0


@pytest.mark.parametrize("bad, match", [
    (dict(delta=1.5), "delta"), (dict(accountant="moments"), "unknown accountant"),
    (dict(ceiling=-1.0), "ceiling"), (dict(ceiling={"eps": 1.0}), "unknown ceiling keys"),
    (dict(accountant="pld", orders=[2, 3]), "orders"),
])
def test_bad_settings(bad, match):
    with pytest.raises(AccountingError, match=match):
        Ledger(**bad)


def test_bad_spends():
    ledger = Ledger()
    with pytest.raises(AccountingError, match="not a dpkit guarantee"):
        ledger.spend(dp_accounting.GaussianDpEvent(1.0), "raw event")
    with pytest.raises(AccountingError, match="count must be an integer"):
        ledger.spend(GAUSS, "x", count=0)
    with pytest.raises(AccountingError, match="count must be an integer"):
        ledger.spend(GAUSS, "x", count=torch.tensor(1.5))
    ledger.spend(GAUSS, "numpy count", count=torch.tensor(2))
    assert ledger.spends[-1].count == 2 and type(ledger.spends[-1].count) is int
    with pytest.raises(AccountingError, match="non-empty label"):
        ledger.spend(GAUSS, "")


def test_json_round_trip_all_notions():
    ledger = Ledger(delta=1e-6, accountant="pld", ceiling=50.0)
    ledger.spend(DpGuarantee(dp_accounting.GaussianDpEvent(2.0)), "sgd", count=20)
    ledger.spend(DpGuarantee(dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(3.0), dp_accounting.LaplaceDpEvent(1.0)])), "mixed", count=2)
    ledger.spend(MetricDpGuarantee(5.0, "l2", "glove", "token"), "noise")
    ledger.spend(KAnonymityGuarantee(8, 6, 0.05, 2.0), "cluster")
    text = json.dumps(ledger.to_dict(), allow_nan=False)
    again = Ledger.from_dict(json.loads(text))
    assert again.to_dict() == ledger.to_dict()
    assert again.epsilon() == ledger.epsilon() and again.ceiling == ledger.ceiling
    with pytest.raises(AccountingError, match="not a dpkit ledger"):
        Ledger.from_dict({"format": "other"})
    bad = json.loads(text)
    bad["spends"][0]["guarantee"]["event"]["type"] = "os.system"
    with pytest.raises(AccountingError, match="unknown dp-accounting event type"):
        Ledger.from_dict(bad)


def test_table_lists_spends_and_totals():
    ledger = Ledger(ceiling=5.0)
    ledger.spend(DpGuarantee(dpsgd_event(4.0, 0.01, 100)), "train")
    ledger.spend(MetricDpGuarantee(7.0, space="glove"), "noise")
    text = ledger.table()
    for needle in ("train", "Poisson(q=0.01)∘Gaussian(σ/Δ=4) ×100", "η = 7 per token (l2 on glove)",
                   "(ε, δ)-DP [rdp]", "remaining", "epsilon"):
        assert needle in text
