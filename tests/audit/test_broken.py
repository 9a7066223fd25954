"""Every deliberately broken mechanism must FAIL, with a witness above its claim."""

import pytest

from dpkit.audit import Verdict, audit

from broken import BROKEN
from dpkit.contract.plugins import get_registry

SAMPLES = {"broken_per_coordinate_gamma": 8000, "broken_half_scale_laplace": 4000}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_mechanism_fails(name):
    report = audit(name, BROKEN[name], samples=SAMPLES.get(name, 2000), seed=0, registry=get_registry())
    assert report.verdict is Verdict.FAIL, report.one_line()
    assert report.witness is not None
    assert report.witness.measured > report.witness.claimed
    assert report.witness.event
    assert "FAIL" in report.one_line()


def test_sampler_mismatch_is_detected_even_with_the_right_density():
    """Per-coordinate Gamma declares the correct Laplace density: the sampler check rejects it."""
    report = audit("broken_per_coordinate_gamma", {"eta": 2.0}, samples=2000, seed=1, registry=get_registry())
    assert report.checks["sampler_matches_declared_law"] is False
    assert report.verdict is not Verdict.PASS
