"""The planted-bug battery: every bug planted in the real plug-in code is caught by an audit or a
test, and no check flags the unmodified code (docs/audit.md, "Planted-bug battery")."""

import importlib

import pytest

from dpkit.testing.battery import run_battery, assertion_check
from dpkit.testing.planted import PlantedBug, Patch, mutation_scores, replace, scale_draws

BATTERIES = ["dpkit_dped.planted", "dpkit_snd.planted", "dpkit_hiddenecho.planted",
             "dpkit_baselines.planted", "dpkit_stencil.planted", "dpkit_obfuslm.planted"]


@pytest.mark.parametrize("module", BATTERIES)
def test_every_planted_bug_is_caught(module):
    battery = importlib.import_module(module)
    result = run_battery(battery.PLANTED_BUGS, battery.battery_checks())
    assert not result.false_alarms, result.table()
    assert result.all_caught, result.table()
    assert all(caught == total for caught, total in mutation_scores(result.outcomes).values())


def test_planted_patch_is_restored_and_scales_one_site_only():
    import dpkit_dped.aggregation as agg
    import torch

    bug = PlantedBug("votes ×0", "noise scaled", "x", (scale_draws(agg.__name__, 0.0,
                                                                    site="sigma_votes"),))
    original = agg.torch
    with bug.planted():
        assert agg.torch is not original
        assert torch.randn(3).abs().sum() > 0  # other callers are untouched
    assert agg.torch is original


def test_a_check_that_flags_clean_code_is_a_false_alarm():
    def always_fails():
        raise AssertionError("flags everything")

    bug = PlantedBug("nothing", "noise scaled", "t",
                     (replace("dpkit.testing.planted", "KINDS", lambda kinds: kinds),))
    result = run_battery([bug], {"t": [assertion_check("always", always_fails)]})
    assert result.false_alarms and not result.all_caught


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind"):
        PlantedBug("x", "typo", "t", (Patch("dpkit", "x", lambda o: o),))
