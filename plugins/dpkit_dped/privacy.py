"""DPED's privacy accounting: sensitivities, per-query Gaussian events, σ calibration, ledger spends.

Per query DPED releases up to three Gaussian mechanisms; their noise multipliers (σ / sensitivity)
are one calibrated multiplier z split by budget shares s (1/zᵢ² = sᵢ/z², so Σ 1/zᵢ² = 1/z² and the
composed per-query event equals one Gaussian of multiplier z under RDP and PLD alike):

- the Confident-GNMax threshold check on the top count of the summed outputs (sensitivity 1: each
  entry of a one-hot or probability vector lies in [0, 1], so one teacher moves every entry of the
  sum, and hence its maximum, by at most 1);
- the teachers' summed outputs: the GNMax vote histogram (hard targets) or the sum of the
  teachers' probability vectors (soft targets). Both have L2 sensitivity √2: one teacher's one-hot
  vote or probability vector p moves to p', and for any two points of the probability simplex
  ‖p − p'‖₂² = ‖p‖² + ‖p'‖² − 2⟨p, p'⟩ ≤ 1 + 1 − 0 (attained by two distinct one-hot vectors);
- the mean of teacher hidden vectors clipped to norm C (sensitivity 2C/N: one teacher's vector can
  move from c to −c, and the mean divides by N).

Every query is charged for all three releases, answered or not (the number answered depends on the
private votes; charging the worst case keeps the count data-independent). The paper's noiseless
threshold (``faithful``) is not DP and is recorded as :class:`dpkit.accounting.NoGuarantee`, and
so is a ``noiseless`` plan (σ = 0 on every release, the reference row of a pipeline check). A plan
that would drop a noise draw any other way is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import dp_accounting

from dpkit import DpGuarantee, NoGuarantee, calibrate_noise, epsilon_of

THRESHOLD_SENSITIVITY = 1.0
VOTES_SENSITIVITY = math.sqrt(2.0)

NOISELESS_REASON = ("noiseless reference: the teachers' summed outputs, threshold check and hidden "
                    "means are released without noise (σ = 0)")
FAITHFUL_REASON = ("DPED's rare-word threshold compares the noiseless top vote count with r: "
                   "whether a query is answered reveals one teacher's vote exactly (paper §3.4)")


def hidden_sensitivity(clip: float, teachers: int) -> float:
    """L2 sensitivity of the mean of ``teachers`` vectors clipped to norm ``clip``: 2C/N."""
    return 2.0 * clip / teachers


OUTPUT_LABELS = {"hard": "GNMax vote histogram (Δ₂=√2)",
                 "soft": "sum of teacher probability vectors (Δ₂=√2)"}


@dataclass(frozen=True)
class NoisePlan:
    """Noise std of each per-query release; ``sigma_hidden`` is ``None`` when there is no hidden
    release, ``sigma_threshold`` only under the paper's noiseless (``faithful``) threshold.

    ``target`` names what the teachers' summed outputs are (``hard`` votes or ``soft``
    probability vectors); both have the same sensitivity, hence the same events.
    """

    queries: int
    sigma_threshold: float | None
    sigma_votes: float
    sigma_hidden: float | None = None
    hidden_sens: float = 0.0
    faithful: bool = False
    noiseless: bool = False
    target: str = "hard"
    note: str = ""  # appended to every ledger label (the paper's-accounting row says what it is)

    def __post_init__(self):
        if self.target not in OUTPUT_LABELS:
            raise ValueError(f"target must be one of {sorted(OUTPUT_LABELS)}, got {self.target!r}")
        if self.noiseless:
            return
        if self.sigma_threshold is None and not self.faithful:
            raise ValueError("the threshold check has no noise but the plan is neither faithful "
                             "nor noiseless: the ledger would claim a noisy check; give it a "
                             "positive budget share or use threshold: faithful (ε = ∞)")
        drawn = {"votes": self.sigma_votes, "threshold": self.sigma_threshold,
                 "hidden": self.sigma_hidden}
        zero = [k for k, v in drawn.items() if v is not None and not v > 0]
        if zero:
            raise ValueError(f"σ of {', '.join(zero)} is {[drawn[k] for k in zero]}, not positive: "
                             "a noiseless release needs noiseless=True (recorded as ε = ∞)")

    def per_query_events(self) -> list[tuple[dp_accounting.DpEvent, str]]:
        """The Gaussian events of one query with labels, as noise multipliers σ/Δ."""
        if self.noiseless:
            raise ValueError("a noiseless plan has no Gaussian events; its ledger entry is a "
                             "NoGuarantee (see spends())")
        out = []
        if self.sigma_threshold is not None:
            out.append((dp_accounting.GaussianDpEvent(self.sigma_threshold / THRESHOLD_SENSITIVITY),
                        "threshold check, noisy top count (Δ=1)"))
        out.append((dp_accounting.GaussianDpEvent(self.sigma_votes / VOTES_SENSITIVITY),
                    OUTPUT_LABELS[self.target]))
        if self.sigma_hidden is not None:
            out.append((dp_accounting.GaussianDpEvent(self.sigma_hidden / self.hidden_sens),
                        f"mean of clipped teacher vectors (Δ₂=2C/N={self.hidden_sens:.4g})"))
        return out

    def spends(self) -> list[tuple[object, str, int]]:
        """(guarantee, label, count) for the ledger, grouped: count = number of queries."""
        if self.noiseless:
            out = [(NoGuarantee(NOISELESS_REASON), "noiseless threshold check (σ = 0)", 1),
                   (NoGuarantee(NOISELESS_REASON), "noiseless teacher outputs (σ = 0)", 1)]
            if self.sigma_hidden is not None:
                out.append((NoGuarantee(NOISELESS_REASON), "noiseless hidden means (σ = 0)", 1))
            return out
        out = [(DpGuarantee(ev), label + self.note, self.queries)
               for ev, label in self.per_query_events()]
        if self.faithful:
            out.insert(0, (NoGuarantee(FAITHFUL_REASON), "noiseless rare-word threshold (faithful)", 1))
        return out

    def total_event(self) -> dp_accounting.DpEvent:
        """All DP releases of the run as one event, grouped per release as the ledger groups them."""
        return dp_accounting.ComposedDpEvent([dp_accounting.SelfComposedDpEvent(ev, self.queries)
                                              for ev, _ in self.per_query_events()])


def noiseless_plan(queries: int, *, hidden: bool, hidden_sens: float = 0.0,
                   target: str = "hard") -> NoisePlan:
    """Every σ = 0: the pipeline's noiseless reference, recorded on the ledger as ε = ∞."""
    return NoisePlan(queries=queries, sigma_threshold=0.0, sigma_votes=0.0,
                     sigma_hidden=0.0 if hidden else None, hidden_sens=hidden_sens,
                     noiseless=True, target=target)


def plan_noise(*, target_epsilon: float, delta: float, accountant: str, queries: int,
               shares: dict[str, float], noisy_threshold: bool, hidden_sens: float = 0.0,
               target: str = "hard") -> NoisePlan:
    """Calibrate σ of each release so that ``queries`` queries spend at most (target_epsilon, delta).

    ``shares`` maps ``threshold`` / ``votes`` / ``hidden`` to budget shares; components absent from
    the protocol (``hidden`` for PATE, ``threshold`` when faithful) are dropped and the rest
    renormalized. A component present in the protocol with a share ≤ 0 would be released without
    noise and is refused.
    """
    needed = ["votes"] + (["threshold"] if noisy_threshold else []) + (
        ["hidden"] if "hidden" in shares else [])
    missing = [k for k in needed if not shares.get(k, 0) > 0]
    if missing:
        raise ValueError(f"share_{missing[0]}={shares.get(missing[0], 0)} would release the "
                         f"{missing[0]} {'check' if missing[0] == 'threshold' else 'values'} "
                         "without noise while the ledger stays finite; give it a positive share"
                         + (" (or threshold: faithful, recorded as ε = ∞)"
                            if missing[0] == "threshold" else ""))
    active = {k: v for k, v in shares.items() if k in needed}
    total = sum(active.values())
    mult = {k: 1.0 / math.sqrt(v / total) for k, v in active.items()}

    def build(z: float) -> NoisePlan:
        return NoisePlan(
            queries=queries,
            sigma_threshold=z * mult["threshold"] * THRESHOLD_SENSITIVITY if "threshold" in mult else None,
            sigma_votes=z * mult["votes"] * VOTES_SENSITIVITY,
            sigma_hidden=z * mult["hidden"] * hidden_sens if "hidden" in mult else None,
            hidden_sens=hidden_sens, faithful=not noisy_threshold, target=target)

    z = calibrate_noise(lambda z: build(z).total_event(), target_epsilon, delta, accountant)
    return build(z)


def paper_plan(*, epsilon_per_query: float, delta: float, accountant: str, queries: int,
               hidden_sens: float, teachers: int, clip: float, target: str = "hard") -> NoisePlan:
    """The paper's accounting (App. B.2), with its cost stated as it really composes.

    Each release gets the classical per-query σ = Δ·√(2 ln(1.25/δ))/ε with the paper's
    sensitivities — 1 for the votes and the threshold check, C/N for the hidden mean — and ε is
    not composed over the queries. The plan's events keep the true sensitivities (√2, 1, 2C/N),
    so the ledger composes what the ``queries`` queries really spend (e.g. ε ≈ 592 for 3,000
    queries at ε = 1 per query, δ = 1e-5, RDP; ≈ 515 without the threshold check, which the paper
    leaves noiseless); every label states both. ``hidden_sens`` 0 plans no hidden release (PATE).
    """
    factor = math.sqrt(2 * math.log(1.25 / delta)) / epsilon_per_query
    plan = NoisePlan(queries=queries, sigma_threshold=factor, sigma_votes=factor,
                     sigma_hidden=factor * clip / teachers if hidden_sens else None,
                     hidden_sens=hidden_sens, target=target)
    composed = epsilon_of(plan.total_event(), delta, accountant)
    return replace(plan, note=(f"; the paper's accounting: ε = {epsilon_per_query:g} per query and "
                               f"release (Δ = 1, C/N), composed over {queries} queries with the "
                               f"true Δ: ε = {composed:.4g} at δ = {delta:g}"))
