"""The JSON round trip of events and guarantees: the ledger, the budget store and the results
read every spend back through it, so a lossy trip would state a different ε than was spent."""

from __future__ import annotations

import json

import dp_accounting
import pytest

from dpkit.accounting import (
    DpGuarantee,
    KAnonymityGuarantee,
    Ledger,
    MetricDpGuarantee,
    NoGuarantee,
)
from dpkit.accounting.pure import ApproxDpEvent, PureDpEvent
from dpkit.accounting.serialize import (
    event_from_dict,
    event_to_dict,
    guarantee_from_dict,
    guarantee_to_dict,
)
from dpkit.base.errors import AccountingError

GAUSS = dp_accounting.GaussianDpEvent(3.0)
NESTED = dp_accounting.ComposedDpEvent([
    dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.1)), 500),
    dp_accounting.SampledWithoutReplacementDpEvent(
        1000, 50, dp_accounting.LaplaceDpEvent(2.0)),
    PureDpEvent(0.5, neighboring="replace_one"),
    ApproxDpEvent(0.25, 1e-9),
    dp_accounting.ComposedDpEvent([GAUSS, dp_accounting.NoOpDpEvent()]),
])
GUARANTEES = [
    DpGuarantee(NESTED, "training"),
    DpGuarantee(GAUSS),
    MetricDpGuarantee(12.5, metric="l1", space="glove", unit="sequence"),
    KAnonymityGuarantee(k_requested=8, k_achieved=5, share_below_k=0.125, epsilon=1.5),
    NoGuarantee("the clean model weights cross the wire"),
]


def _through_json(data: dict) -> dict:
    """What the ledger file and the budget store hold: the dict as JSON text, read back."""
    return json.loads(json.dumps(data))


def _nested_events(event: dp_accounting.DpEvent) -> list[dp_accounting.DpEvent]:
    inner = [event.event] if hasattr(event, "event") else list(getattr(event, "events", []))
    return [event, *(e for i in inner for e in _nested_events(i))]


@pytest.mark.parametrize("event", _nested_events(NESTED), ids=lambda e: type(e).__name__)
def test_every_event_and_every_nested_event_comes_back_equal_through_json(event):
    back = event_from_dict(_through_json(event_to_dict(event)))
    assert type(back) is type(event) and back == event


def test_an_event_is_written_as_its_class_and_its_fields():
    data = event_to_dict(dp_accounting.PoissonSampledDpEvent(0.01, GAUSS))
    assert data == {"type": "PoissonSampledDpEvent", "sampling_probability": 0.01,
                    "event": {"type": "GaussianDpEvent", "noise_multiplier": 3.0}}


@pytest.mark.parametrize("g", GUARANTEES, ids=[f"{g.notion}{i}" for i, g in enumerate(GUARANTEES)])
def test_every_guarantee_comes_back_equal_through_json(g):
    data = _through_json(guarantee_to_dict(g))
    assert data["notion"] == g.notion
    assert guarantee_from_dict(data) == g


@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_a_ledger_read_back_states_the_epsilon_that_was_spent(accountant):
    """The store and the results compose what they read back: the same ε, to the last bit."""
    ledger = Ledger(accountant=accountant)
    ledger.spend(DpGuarantee(dp_accounting.PoissonSampledDpEvent(
        0.02, dp_accounting.GaussianDpEvent(1.3))), "step", count=200)
    ledger.spend(DpGuarantee.pure(0.3), "count", count=3)
    back = Ledger.from_dict(_through_json(ledger.to_dict()))
    assert back.epsilon() == ledger.epsilon() > 0


def test_an_unknown_event_type_is_refused_naming_where_types_come_from():
    for name in ("RenyiDpEvent", "attr", "Sequence", None):
        with pytest.raises(AccountingError, match=f"unknown dp-accounting event type {name!r}.*"
                           "dp_accounting.dp_event or dpkit.accounting.pure"):
            event_from_dict({"type": name, "noise_multiplier": 1.0})


def test_an_event_with_the_wrong_fields_is_refused_naming_them():
    with pytest.raises(AccountingError, match=r"cannot rebuild GaussianDpEvent from fields "
                       r"\['noise', 'scale'\]"):
        event_from_dict({"type": "GaussianDpEvent", "scale": 1.0, "noise": 2.0})


def test_a_guarantee_of_an_unknown_notion_is_refused_listing_the_known_ones():
    with pytest.raises(AccountingError, match="unknown guarantee notion 'renyi'.*expected one of "
                       "dp, metric_dp, k_anonymity, none"):
        guarantee_from_dict({"notion": "renyi", "eta": 1.0})
    with pytest.raises(AccountingError, match="unknown guarantee notion None"):
        guarantee_from_dict({"eta": 1.0})


def test_an_object_that_is_no_guarantee_cannot_be_written():
    with pytest.raises(AccountingError, match="not a dpkit guarantee: .*use one of DpGuarantee, "
                       "MetricDpGuarantee, KAnonymityGuarantee, NoGuarantee"):
        guarantee_to_dict(GAUSS)  # type: ignore[arg-type]


def test_a_dp_guarantee_written_without_a_description_reads_back_without_one():
    data = {"notion": "dp", "event": event_to_dict(GAUSS)}
    assert guarantee_from_dict(data) == DpGuarantee(GAUSS)
