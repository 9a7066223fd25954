"""Pure ε-DP and (ε, δ)-DP as dp-accounting events, composed tightly by both accountants.

Any ε-DP mechanism is a post-processing of binary randomized response at ε (Kairouz, Oh and
Viswanath, "The Composition Theorem for Differential Privacy", ICML 2015), so that pair is the
worst case each accountant composes:

- PLD: dp-accounting's ``from_privacy_parameters`` — loss ±ε (and +∞ with probability δ);
- RDP: the Rényi divergence of binary randomized response,
  ``D_α = log((e^{αε} + e^{(1-α)ε}) / (1 + e^ε)) / (α - 1)``, which every ε-DP mechanism stays
  under (data processing) and randomized response attains. It is below both bounds of Bun and
  Steinke, "Concentrated Differential Privacy: Simplifications, Extensions, and Lower Bounds"
  (TCC 2016): ε and αε²/2. (ε, δ) with δ > 0 has no finite RDP, so only the PLD accountant
  composes :class:`ApproxDpEvent`.
"""

from __future__ import annotations

import math

import attr
import dp_accounting
import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld.pld_privacy_accountant import PLDAccountant
from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

NEIGHBORING = {"add_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
               "replace_one": dp_accounting.NeighboringRelation.REPLACE_ONE,
               "replace_special": dp_accounting.NeighboringRelation.REPLACE_SPECIAL}
"""dpkit's names for dp-accounting's neighbouring relations."""
_NAME_OF = {v: k for k, v in NEIGHBORING.items()}
_Details = dp_accounting.PrivacyAccountant.CompositionErrorDetails


@attr.s(frozen=True, slots=True, auto_attribs=True)
class PureDpEvent(dp_accounting.DpEvent):
    """An ε-DP release; ``neighboring`` is the relation ε is stated in (None: the ledger's)."""

    epsilon: float
    neighboring: str | None = None


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ApproxDpEvent(dp_accounting.DpEvent):
    """An (ε, δ)-DP release; ``neighboring`` is the relation it is stated in (None: the ledger's)."""

    epsilon: float
    delta: float
    neighboring: str | None = None


def pure_dp_rdp(epsilon: float, order: float) -> float:
    """Rényi DP at ``order`` of the worst ε-DP mechanism (binary randomized response)."""
    e, a = float(epsilon), float(order)
    if e == 0:
        return 0.0
    if math.isinf(a):
        return e
    if a == 1:  # KL divergence, the α → 1 limit
        return e * math.tanh(e / 2)
    log_mass = np.logaddexp(a * e, (1 - a) * e) - np.logaddexp(0.0, e)
    return float(min(max(log_mass / (a - 1), 0.0), e, a * e * e / 2))


def effective_epsilon(event: PureDpEvent | ApproxDpEvent, relation) -> float | None:
    """ε under the dp-accounting ``relation``, or None when the declared relation does not imply it."""
    declared = event.neighboring
    if declared is None or NEIGHBORING[declared] == relation:
        return event.epsilon
    if declared == "add_remove" and relation == NEIGHBORING["replace_one"]:
        return 2 * event.epsilon  # a replacement is one removal and one addition
    if declared == "replace_one" and relation == NEIGHBORING["replace_special"]:
        return event.epsilon  # replacing by the special record is one replacement
    return None


def _check(event, relation) -> dp_accounting.PrivacyAccountant.CompositionErrorDetails | None:
    """None if ``event`` is well-formed and stated in a relation the accountant can use."""
    if event.neighboring is not None and event.neighboring not in NEIGHBORING:
        return _Details(event, f"unknown neighbouring relation {event.neighboring!r}; use one of "
                               f"{', '.join(NEIGHBORING)}")
    if not (event.epsilon >= 0 and math.isfinite(event.epsilon)):
        return _Details(event, f"epsilon must be a finite number ≥ 0, got {event.epsilon!r}")
    if isinstance(event, ApproxDpEvent) and not 0 <= event.delta <= 1:
        return _Details(event, f"delta must lie in [0, 1], got {event.delta!r}")
    if effective_epsilon(event, relation) is None:
        return _Details(event, f"ε is stated under {event.neighboring} neighbours, which does not "
                               f"bound the ledger's {_NAME_OF.get(relation, relation)} relation")
    return None


class DpkitPLDAccountant(PLDAccountant):
    """dp-accounting's PLD accountant that also composes :class:`PureDpEvent` / :class:`ApproxDpEvent`."""

    def _maybe_compose(self, event, count, do_compose):
        if isinstance(event, dp_accounting.RandomizedResponseDpEvent):
            return self._compose_randomized_response(event, count, do_compose)
        if not isinstance(event, (PureDpEvent, ApproxDpEvent)):
            return super()._maybe_compose(event, count, do_compose)
        problem = _check(event, self.neighboring_relation)
        if problem is None and do_compose and count > 0:
            delta = event.delta if isinstance(event, ApproxDpEvent) else 0.0
            params = pld_common.DifferentialPrivacyParameters(
                effective_epsilon(event, self.neighboring_relation), delta)
            pld = pld_lib.from_privacy_parameters(
                params, value_discretization_interval=self._value_discretization_interval)
            self._pld = self._pld.compose(pld.self_compose(count) if count > 1 else pld)
        return problem


    def _compose_randomized_response(self, event, count, do_compose):
        """dp-accounting's randomized response, composed ``count`` times (it composes it once)."""
        problem = super()._maybe_compose(event, count, False)
        if problem is not None or not do_compose:
            return problem
        if count <= 1 or event.num_buckets == 1 or event.noise_parameter == 0:
            return super()._maybe_compose(event, count, True)
        pld = pld_lib.from_randomized_response(
            noise_parameter=event.noise_parameter, num_buckets=event.num_buckets,
            value_discretization_interval=self._value_discretization_interval,
            neighboring_relation=self.neighboring_relation)
        self._pld = self._pld.compose(pld.self_compose(count) if count > 1 else pld)
        return None


def replace_one_sensitivity(event):
    """``event`` with its add/remove sensitivity doubled, for a replace-one ledger (a
    replacement is one removal and one addition): dp-accounting's PLD reads a Gaussian so, its
    RDP reads Gaussian and Laplace events the same under every relation, which under-states ε."""
    if isinstance(event, dp_accounting.GaussianDpEvent):
        return dp_accounting.GaussianDpEvent(event.noise_multiplier / 2)
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        return dp_accounting.LaplaceDpEvent(event.noise_multiplier / 2)
    return event


class DpkitRdpAccountant(RdpAccountant):
    """dp-accounting's RDP accountant that also composes :class:`PureDpEvent` (tight RR curve),
    and reads Gaussian and Laplace events with the replace-one sensitivity on a replace-one
    ledger (:func:`replace_one_sensitivity`)."""

    def _maybe_compose(self, event, count, do_compose):
        if self.neighboring_relation == dp_accounting.NeighboringRelation.REPLACE_ONE:
            event = replace_one_sensitivity(event)
        if isinstance(event, ApproxDpEvent) and event.delta > 0:
            return _Details(event, "(ε, δ)-DP with δ > 0 has no finite Rényi DP; use "
                                   "accountant='pld'")
        if not isinstance(event, (PureDpEvent, ApproxDpEvent)):
            return super()._maybe_compose(event, count, do_compose)
        problem = _check(event, self.neighboring_relation)
        if problem is None and do_compose:
            epsilon = effective_epsilon(event, self.neighboring_relation)
            self._rdp += count * np.array([pure_dp_rdp(epsilon, a) for a in self._orders])
        return problem
