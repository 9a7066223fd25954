"""The auditor's white-box checks: the exposed noise against the declared law, and independence.

Both run after the black-box draws (:mod:`dpkit.audit.auditor`). Their p-values join the
sampler-versus-declared-law tests (a rejection is LAW_MISMATCH); exactly repeated noise across two
calls, cells or seeds is a FAIL with ε = ∞, since two releases with the same noise reveal the
difference of their inputs exactly while the ledger composes them as independent.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from dpkit.audit.claims import Claim
from dpkit.audit.independence import mechanism_draw, pair_tests
from dpkit.audit.inputs import AuditPair
from dpkit.audit.noise_law import declared_laplace_eta, exposes_noise, laplace_l2_pvalue
from dpkit.audit.report import AuditReport, Finding
from dpkit.contract.context import derive_seed

SEQUENCE_CALLS = 64
"""Calls per draw for sequence mechanisms (one sequence per call)."""
ROWS = 1000
"""Rows per draw for per-token mechanisms."""


def noise_checks(mech: Any, space: Any, claim: Claim, pair: AuditPair, report: AuditReport,
                 seed: int, per_row: bool) -> list[float]:
    """Run the white-box law test (where the mechanism exposes its noise) and the independence
    pairs on ``pair.x``; record them on ``report``; return their p-values."""
    law_tests = report.checks.setdefault("law_tests", {})
    p_values = []
    calls = min(ROWS, report.samples) if per_row else SEQUENCE_CALLS
    eta = declared_laplace_eta(mech, space) if exposes_noise(mech) else None
    if eta is not None:
        gen = torch.Generator(device=space.vectors.device).manual_seed(derive_seed(seed, "noise-law"))
        draw = mechanism_draw(mech, pair.x, calls, space, per_row)
        noise = draw(gen).reshape(-1, space.dim)
        p = laplace_l2_pvalue(noise, eta)
        law_tests["noise (white-box)"] = p
        report.checks["noise_law"] = {"eta_declared": eta, "rows": len(noise),
                                      "mean_norm": float(noise.norm(dim=1).mean()),
                                      "expected_mean_norm": space.dim / eta, "p": p}
        p_values.append(p)
    tests = pair_tests(mechanism_draw(mech, pair.x, calls, space, per_row), seed,
                       space.vectors.device)
    report.checks["independence"] = {t.pairing: {"p": t.p_value, "repeats": t.repeats,
                                                 "rows": t.rows} for t in tests}
    for t in tests:
        law_tests[f"independence: {t.pairing}"] = t.p_value
        p_values.append(t.p_value)
        if t.repeats >= 2:
            report.findings.append(Finding(
                "independence (white-box)" if exposes_noise(mech) else "independence", pair.label,
                pair.distance, pair.claimed, math.inf, math.inf,
                f"{t.pairing}: the noise is identical in {t.repeats} of {t.rows} draws; two "
                "releases then reveal the difference of their inputs exactly, while the ledger "
                "composes them as independent", claim.delta,
                {"repeats": t.repeats, "rows": t.rows}))
    report.strategies.append("independence of two calls, cells and seeds")
    return p_values
