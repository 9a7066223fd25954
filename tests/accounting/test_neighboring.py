"""Neighbouring relations: chosen on a Ledger and in a spec, checked per event, passed to runs."""

import json
import math

import pytest
from dp_accounting import NeighboringRelation
from dp_accounting import dp_event as events
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpkit.accounting import DpGuarantee, Ledger, dpsgd_event
from dpkit.base.errors import AccountingError

RR = events.RandomizedResponseDpEvent(noise_parameter=0.3, num_buckets=5)
TREE = events.SingleEpochTreeAggregationDpEvent(2.0, 64)


@pytest.mark.parametrize(("accountant", "reference"), [
    ("rdp", RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)),
    ("pld", PLDAccountant(NeighboringRelation.REPLACE_ONE)),
])
def test_replace_one_ledger_matches_dp_accounting(accountant, reference):
    ledger = Ledger(accountant=accountant, neighboring="replace_one")
    ledger.spend(DpGuarantee(RR), "rr")
    stated = math.log1p(5 * 0.7 / 0.3)  # RR's own ε: (1 - p + p/k) / (p/k); RDP's bound is above it
    expected = min(reference.compose(RR).get_epsilon(1e-5), stated)
    assert ledger.epsilon() == pytest.approx(expected, rel=1e-9)
    restored = Ledger.from_dict(json.loads(json.dumps(ledger.to_dict())))
    assert restored.neighboring == "replace_one" and restored.epsilon() == ledger.epsilon()


def test_replace_special_composes_tree_aggregation():
    ledger = Ledger(neighboring="replace_special")
    ledger.spend(DpGuarantee(TREE), "tree")
    reference = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_SPECIAL)
    assert ledger.epsilon() == pytest.approx(reference.compose(TREE).get_epsilon(1e-5), rel=1e-9)


def test_event_stated_in_another_relation_is_refused_clearly():
    with pytest.raises(AccountingError, match=r"replace_one neighbours\) cannot compose Poisson"
                                              r".*ADD_OR_REMOVE_ONE.*use accountant='pld'"):
        Ledger(neighboring="replace_one").spend(DpGuarantee(dpsgd_event(1.0, 0.01, 1)), "dpsgd")
    laplace = DpGuarantee(events.PoissonSampledDpEvent(0.1, events.LaplaceDpEvent(1.0)))
    with pytest.raises(AccountingError, match="cannot either.*add_remove, replace_special"):
        Ledger(accountant="pld", neighboring="replace_one").spend(laplace, "laplace")
    with pytest.raises(AccountingError, match="unknown neighbouring relation 'swap'"):
        Ledger(neighboring="swap")


def test_spec_privacy_block_reaches_the_run_ledger(toy_spec_text, toy_plugins):
    from dpkit.contract.plugins import get_registry
    from dpkit.runner import run_spec
    from dpkit.spec.cells import expand
    from dpkit.spec import load_spec

    path, out = toy_spec_text
    registry = get_registry()
    default_keys = [c.key for c in expand(load_spec(path, registry=get_registry()), registry)]
    text = path.read_text().replace("device: cpu", "device: cpu\nprivacy: {neighboring: replace_one}")
    path.write_text(text)
    spec = load_spec(path, registry=get_registry())
    assert spec.privacy.neighboring == "replace_one"
    assert [c.key for c in expand(spec, registry)] != default_keys  # a different relation is another cell
    run_spec(spec, show_progress=False, registry=get_registry())
    ledgers = json.loads((out / "ledger.json").read_text())["cells"]
    assert {entry["ledger"]["neighboring"] for entry in ledgers.values()} == {"replace_one"}


@pytest.mark.parametrize("z", [0.8, 2.0, 5.0])
def test_a_gaussian_on_a_replace_one_ledger_is_charged_the_replacement_sensitivity(z):
    """dp-accounting's RDP reads a Gaussian the same under every relation; its PLD doubles the
    sensitivity under replace-one. Neither dpkit accountant may charge less than PLD's reading
    (RDP's bound lies above PLD's), nor the add/remove price."""
    gauss = events.SelfComposedDpEvent(events.GaussianDpEvent(z), 10)
    pld = PLDAccountant(NeighboringRelation.REPLACE_ONE).compose(gauss).get_epsilon(1e-5)
    halved = RdpAccountant().compose(events.SelfComposedDpEvent(events.GaussianDpEvent(z / 2), 10))
    charged = {}
    for accountant in ("rdp", "pld"):
        ledger = Ledger(accountant=accountant, neighboring="replace_one")
        ledger.spend(DpGuarantee(gauss), "gauss")
        charged[accountant] = ledger.epsilon()
        assert charged[accountant] >= pld * (1 - 1e-9)
        add_remove = Ledger(accountant=accountant)
        add_remove.spend(DpGuarantee(gauss), "gauss")
        assert charged[accountant] > add_remove.epsilon()
    assert charged["rdp"] == pytest.approx(halved.get_epsilon(1e-5), rel=1e-9)
    assert charged["pld"] == pytest.approx(pld, rel=1e-9)


def test_a_laplace_on_a_replace_one_ledger_costs_twice_its_add_remove_epsilon():
    lap = events.LaplaceDpEvent(2.0)  # ε = 1/2 under add/remove
    charged = []
    for neighboring in ("add_remove", "replace_one"):
        ledger = Ledger(neighboring=neighboring)
        ledger.spend(DpGuarantee(lap), "lap")
        charged.append(ledger.epsilon())
    assert charged == pytest.approx([0.5, 1.0])
