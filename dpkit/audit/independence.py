"""Independence of noise draws: two calls, two cells, two seeds must not repeat or correlate.

The ledger composes every release as if its noise were fresh. Noise drawn once and reused across
calls, a generator re-seeded to a constant before each draw, or one stream shared by two cells
all keep each draw's *marginal* law right — every single-release test passes — while two
releases together reveal x − x′ exactly. This module draws the same thing twice and tests the
pairs:

* **two calls** — one generator, two consecutive calls (reuse across calls, re-seeding);
* **two cells** — generators seeded with two derived seeds (``derive_seed(seed, "cell-a")``
  and ``"cell-b"``): what two cells of a spec get;
* **two seeds** — generators seeded ``seed`` and ``seed + 1``.

Each pair ``(a, b)`` (``[n, …]``, row i of ``a`` and of ``b`` from the same input) is tested for
dependence: exactly repeated float rows (impossible for continuous noise) are counted; float rows
are tested by the correlation of each coordinate and of the norms (Fisher z); integer outputs
by the number of paired agreements against its permutation distribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from dpkit.contract.context import derive_seed

PAIRINGS = ("two calls", "two cells", "two seeds")
PERMUTATIONS = 200
REPEAT_TOLERANCE = 1e-6
"""Rows equal to this relative tolerance count as repeated (noise reused, then added to inputs
and subtracted again, differs by rounding); two or more repeated rows are a repeat."""


@dataclass
class PairTest:
    """Dependence between two draws: p-value, exactly repeated rows, rows compared."""

    pairing: str
    p_value: float
    repeats: int
    rows: int

    def describe(self) -> str:
        """One line: the pairing, its p-value and repeats."""
        return (f"{self.pairing}: p = {self.p_value:.2g}, {self.repeats} of {self.rows} rows "
                "repeated exactly")


def dependence(a: torch.Tensor, b: torch.Tensor, seed: int = 0) -> tuple[float, int]:
    """(p-value of "row i of ``a`` is independent of row i of ``b``", repeated rows); two or more
    repeated float rows give p = 0."""
    a = a.detach().cpu().reshape(len(a), -1)
    b = b.detach().cpu().reshape(len(b), -1)
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    if n < 4:
        return 1.0, 0
    if not a.is_floating_point():
        return _agreement_p(a.numpy(), b.numpy(), seed), 0
    x, y = a.double().numpy(), b.double().numpy()
    repeats = int(np.all(np.abs(x - y) <= REPEAT_TOLERANCE * (np.abs(x) + np.abs(y)), axis=1).sum())
    if repeats >= 2:
        return 0.0, repeats
    columns = [(x[:, j], y[:, j]) for j in range(x.shape[1])]
    columns.append((np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)))
    ps = [_correlation_p(u, v) for u, v in columns]
    return float(min(1.0, min(ps) * len(ps))), 0


def _correlation_p(u: np.ndarray, v: np.ndarray) -> float:
    """Two-sided p-value of zero Pearson correlation (Fisher z); 1 for a constant column (up to
    rounding: the norms of rows on a sphere are equal but for their last bits)."""
    if _constant(u) or _constant(v):
        return 1.0
    r = float(np.clip(np.corrcoef(u, v)[0, 1], -0.999999, 0.999999))
    z = math.atanh(r) * math.sqrt(len(u) - 3)
    return float(2 * stats.norm.sf(abs(z)))


def _constant(u: np.ndarray) -> bool:
    """Whether every value of ``u`` is equal to 1e-9 of the largest magnitude."""
    return bool(np.ptp(u) <= 1e-9 * np.abs(u).max())


def _agreement_p(a: np.ndarray, b: np.ndarray, seed: int) -> float:
    """One-sided p-value of the paired agreements (whole rows equal) against random pairings."""
    ka = _row_codes(a, b)
    kb = ka[len(a):]
    ka = ka[:len(a)]
    observed = int((ka == kb).sum())
    rng = np.random.default_rng(seed)
    null = np.array([(ka == kb[rng.permutation(len(kb))]).sum() for _ in range(PERMUTATIONS)])
    spread = max(float(null.std()), 0.5)
    return float(stats.norm.sf((observed - null.mean()) / spread))


def _row_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One integer per row of ``a`` then ``b`` (equal rows, equal codes)."""
    _, codes = np.unique(np.concatenate([a, b]), axis=0, return_inverse=True)
    return codes.reshape(-1)


def pair_tests(draw: Callable[[torch.Generator], torch.Tensor], seed: int,
               device: torch.device | str = "cpu") -> list[PairTest]:
    """Draw twice in each of the three :data:`PAIRINGS` and test each pair for dependence."""
    def gen(s: int) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(s)

    one = gen(derive_seed(seed, "independence-calls"))
    pairs = {
        "two calls": (draw(one), draw(one)),
        "two cells": (draw(gen(derive_seed(seed, "cell-a"))), draw(gen(derive_seed(seed, "cell-b")))),
        "two seeds": (draw(gen(seed)), draw(gen(seed + 1))),
    }
    out = []
    for k, (name, (a, b)) in enumerate(pairs.items()):
        p, repeats = dependence(a, b, seed + k)
        out.append(PairTest(name, p, repeats, min(len(a), len(b))))
    return out


def mechanism_draw(mech, x: torch.Tensor, n: int, space, per_row: bool
                   ) -> Callable[[torch.Generator], torch.Tensor]:
    """What to draw twice for a mechanism: the noise it exposes (white-box) where it has
    ``noisy_vectors``, else its outputs; ``n`` copies of one row (per-token mechanisms) or
    ``n`` calls on one sequence."""
    from dpkit.audit.noise_law import exposed_noise, exposes_noise

    device = space.vectors.device
    x = x.to(device)
    white_box = exposes_noise(mech)

    def once(inputs: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        if white_box:
            return exposed_noise(mech, inputs, space, gen)
        return mech.privatize(inputs, space=space, generator=gen).reshape(len(inputs) if per_row
                                                                           else 1, -1).cpu()

    def draw(gen: torch.Generator) -> torch.Tensor:
        if per_row:
            return once(x.expand(n, *x.shape[1:]).contiguous(), gen)
        return torch.cat([once(x, gen).reshape(1, -1) for _ in range(n)])

    return draw
