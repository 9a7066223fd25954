"""Hypothesis strategies for accounting: dp-accounting events, guarantees and spend lists.

Ranges are kept where dp-accounting's RDP accountant is fast and numerically well behaved
(σ ≥ 0.5, q ≤ 0.5, a few thousand steps at most).
"""

from __future__ import annotations

import dp_accounting
from hypothesis import strategies as st

from dpkit.accounting.guarantees import (
    DpGuarantee,
    KAnonymityGuarantee,
    MetricDpGuarantee,
    NoGuarantee,
)

noise_multipliers = st.floats(min_value=0.5, max_value=20.0, allow_nan=False)
sampling_rates = st.floats(min_value=1e-3, max_value=0.5, allow_nan=False)
step_counts = st.integers(min_value=1, max_value=2000)
deltas = st.sampled_from([1e-3, 1e-5, 1e-7])
etas = st.floats(min_value=1e-3, max_value=100.0, allow_nan=False)


@st.composite
def gaussian_events(draw) -> dp_accounting.DpEvent:
    """A Gaussian, optionally Poisson-subsampled."""
    event = dp_accounting.GaussianDpEvent(draw(noise_multipliers))
    if draw(st.booleans()):
        event = dp_accounting.PoissonSampledDpEvent(draw(sampling_rates), event)
    return event


@st.composite
def dp_events(draw) -> dp_accounting.DpEvent:
    """A Gaussian / subsampled Gaussian / Laplace event, possibly self-composed."""
    event = draw(st.one_of(gaussian_events(),
                           st.floats(min_value=0.5, max_value=20.0).map(
                               dp_accounting.LaplaceDpEvent)))
    count = draw(st.integers(min_value=1, max_value=50))
    return event if count == 1 else dp_accounting.SelfComposedDpEvent(event, count)


def dp_guarantees() -> st.SearchStrategy[DpGuarantee]:
    """DpGuarantee wrapping :func:`dp_events`."""
    return dp_events().map(DpGuarantee)


def metric_guarantees(spaces: tuple[str, ...] = ("glove",),
                      units: tuple[str, ...] = ("token", "sequence")
                      ) -> st.SearchStrategy[MetricDpGuarantee]:
    """η-dχ guarantees in L2 over one of ``spaces``, per token or per sequence (``units``)."""
    return st.builds(MetricDpGuarantee, eta=etas, metric=st.just("l2"),
                     space=st.sampled_from(spaces), unit=st.sampled_from(units))


@st.composite
def k_anonymity_guarantees(draw) -> KAnonymityGuarantee:
    """(k, ε) guarantees with achieved k ≤ requested k."""
    k_req = draw(st.integers(min_value=1, max_value=200))
    k_ach = draw(st.integers(min_value=1, max_value=k_req))
    share = 0.0 if k_ach == k_req else draw(st.floats(min_value=0.0, max_value=1.0))
    return KAnonymityGuarantee(k_req, k_ach, share, draw(st.floats(min_value=0.0, max_value=10.0)))


no_guarantees = st.text(alphabet="abcdefgh ", min_size=1, max_size=20).filter(str.strip).map(
    NoGuarantee)


def guarantees(include_none: bool = True):
    """Any guarantee kind (NoGuarantee only if ``include_none``)."""
    kinds = [dp_guarantees(), metric_guarantees(), k_anonymity_guarantees()]
    return st.one_of(*kinds, no_guarantees) if include_none else st.one_of(*kinds)


def spend_lists(guarantee_strategy=None, max_size: int = 6):
    """Lists of (guarantee, label, count) spends."""
    g = guarantee_strategy if guarantee_strategy is not None else guarantees(include_none=False)
    return st.lists(st.tuples(g, st.sampled_from(["train", "noise", "query", "release"]),
                              st.integers(min_value=1, max_value=5)), min_size=1, max_size=max_size)
