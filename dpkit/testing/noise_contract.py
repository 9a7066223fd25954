"""White-box law and independence checks of a mechanism's noise (part of ``MechanismContract``).

* ``test_noise_follows_declared_law`` — where the mechanism exposes the noise it adds
  (``clean_vectors`` / ``noisy_vectors`` / ``decode``, :mod:`dpkit.audit.noise_law`), that noise
  against the law its guarantee declares; for discrete mechanisms with ``output_log_probs``, the
  released tokens against the declared probabilities. Each test first computes, by simulation
  from an independent numpy sampler, its power against a 1.5× scale error (noise scale ×1.5 and
  ÷1.5; for discrete laws the exponent ×1.5 and ÷1.5) at its own level and sample size, and
  refuses to run below :data:`MIN_POWER`.
* ``test_release_is_the_exposed_noise_decoded`` — ``privatize`` releases exactly
  ``decode(noisy_vectors(x))`` with the same generator, so the noise tested is the noise released.
* ``test_draws_are_independent`` — two calls, two cells and two seeds
  (:mod:`dpkit.audit.independence`) give noise that neither repeats nor correlates.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from scipy import stats

from dpkit.accounting.guarantees import NoGuarantee
from dpkit.audit.independence import mechanism_draw, pair_tests
from dpkit.audit.noise_law import (
    declared_laplace_eta,
    exposed_noise,
    exposes_noise,
    laplace_l2_pvalue,
    reference_laplace_l2,
    simulated_power,
)

LEVEL = 1e-3
"""Level of the white-box law tests (a correct mechanism fails one with probability 1e-3)."""
INDEPENDENCE_LEVEL = 1e-4
"""Level of the independence tests, Bonferroni over the three pairings."""
MIN_POWER = 0.95
"""Smallest power against a 1.5× scale error a law test may have."""
SCALE_ERROR = 1.5


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Goodness-of-fit p-value of token ``counts`` against ``probs`` (cells with expectation < 5
    pooled into one)."""
    expected = probs * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    if keep.sum() < 2:
        return 1.0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


def tempered(probs: np.ndarray, power: float) -> np.ndarray:
    """``probs ** power``, renormalised: the law of a sampler whose exponent is off by ``power``."""
    logp = np.where(probs > 0, np.log(np.where(probs > 0, probs, 1.0)) * power, -np.inf)
    w = np.exp(logp - logp.max())
    return w / w.sum()


def laplace_power(n: int, d: int, eta: float, trials: int) -> float:
    """Power of :func:`laplace_l2_pvalue` at ``n`` rows of dimension ``d`` against L2 Laplace
    noise at 1.5× and ÷1.5 the scale 1/η (the smaller of the two), by simulation."""
    def p_value(z: np.ndarray) -> float:
        return laplace_l2_pvalue(z, eta)

    def wrong(rng: np.random.Generator, f: float) -> np.ndarray:
        return reference_laplace_l2(rng, n, d, eta / f)

    return min(simulated_power(p_value, functools.partial(wrong, f=f), LEVEL, trials)
               for f in (SCALE_ERROR, 1 / SCALE_ERROR))


def assert_laplace_law(noise: torch.Tensor | np.ndarray, eta: float, trials: int = 200) -> float:
    """Assert that rows ``[n, d]`` follow the L2 Laplace law of ``eta`` (level :data:`LEVEL`),
    after asserting that the test has power ≥ :data:`MIN_POWER` against a 1.5× scale error at
    this n (by simulation); returns that power."""
    z = np.asarray(noise, dtype=float)
    n, d = z.shape
    power = laplace_power(n, d, eta, trials)
    assert power >= MIN_POWER, f"power {power:.2f} against a 1.5× scale error at n={n}: too few rows"
    p = laplace_l2_pvalue(z, eta)
    assert p >= LEVEL, (f"the noise does not follow Laplace(η={eta:g}) (p = {p:.2g}; mean norm "
                        f"{float(np.linalg.norm(z, axis=1).mean()):.4g}, declared {d / eta:.4g}; "
                        f"power against 1.5× scale {power:.2f})")
    return power


class NoiseContract:
    """White-box noise law, release consistency and independence; mixed into MechanismContract."""

    white_box_draws: ClassVar[int] = 2000
    independence_draws: ClassVar[int] = 400
    power_trials: ClassVar[int] = 100

    def _noise_setup(self) -> tuple[Any, Any, torch.Tensor, bool]:
        mech, space = self.build(), self.make_space()  # type: ignore[attr-defined]
        per_row = self._per_row(mech, space)  # type: ignore[attr-defined]
        x = self.make_input(space)  # type: ignore[attr-defined]
        return mech, space, (x[:1] if per_row else x), per_row

    def test_noise_follows_declared_law(self):
        """The noise added (or the token released) follows the declared law; the test's power
        against a 1.5× scale error, computed by simulation, is at least MIN_POWER."""
        mech, space, x, per_row = self._noise_setup()
        eta = declared_laplace_eta(mech, space) if exposes_noise(mech) else None
        if eta is not None:
            calls = self.white_box_draws if per_row else max(1, self.white_box_draws // len(x))
            gen = torch.Generator().manual_seed(self.seed + 11)  # type: ignore[attr-defined]
            noise = mechanism_draw(mech, x, calls, space, per_row)(gen).reshape(-1, space.dim)
            assert_laplace_law(noise, eta, self.power_trials)
            return
        if callable(getattr(mech, "output_log_probs", None)) and per_row and mech.domain == "token":
            self._discrete_law(mech, space, self.make_input(space))  # type: ignore[attr-defined]
            return
        pytest.skip("the mechanism exposes no noise (noisy_vectors) and no output_log_probs")

    def _discrete_law(self, mech: Any, space: Any, inputs: torch.Tensor) -> None:
        """Chi-square of released tokens against ``output_log_probs`` for the input token with
        the least peaked declared law (a token released verbatim has nothing to test)."""
        table = mech.output_log_probs(inputs.to(space.vectors.device), space).double().exp().cpu()
        row = int(table.max(dim=1).values.argmin())
        x = inputs[row:row + 1]
        probs = table[row].numpy()
        probs = probs / probs.sum()

        def draw(rng, f, n):
            return np.bincount(rng.choice(len(probs), n, p=tempered(probs, f)), minlength=len(probs))

        def p_value(counts: np.ndarray) -> float:
            return chi_square_pvalue(counts, probs)

        for n in (self.white_box_draws, 4 * self.white_box_draws, 16 * self.white_box_draws):
            power = min(simulated_power(p_value, functools.partial(draw, f=f, n=n), LEVEL,
                                        self.power_trials)
                        for f in (SCALE_ERROR, 1 / SCALE_ERROR))
            if power >= MIN_POWER:
                break
        else:
            pytest.skip(f"the declared law is too flat or too peaked for {n} draws to see a 1.5× "
                        f"exponent error (power {power:.2f})")
        gen = torch.Generator().manual_seed(self.seed + 13)  # type: ignore[attr-defined]
        out = mech.privatize(x.expand(n).contiguous(), space=space, generator=gen).cpu().numpy()
        counts = np.bincount(out, minlength=len(probs)).astype(float)
        p = chi_square_pvalue(counts, probs)
        assert p >= LEVEL, (f"released tokens do not follow output_log_probs (p = {p:.2g}; power "
                            f"against a 1.5× exponent {power:.2f})")

    def test_release_is_the_exposed_noise_decoded(self):
        """privatize(x) equals decode(noisy_vectors(x), x) drawn from the same seed."""
        mech, space, x, _ = self._noise_setup()
        if not exposes_noise(mech):
            pytest.skip("the mechanism exposes no noise (noisy_vectors)")
        x = self.make_input(space)  # type: ignore[attr-defined]
        released = mech.privatize(x, space=space, generator=torch.Generator().manual_seed(5))
        noisy = mech.noisy_vectors(x, space=space, generator=torch.Generator().manual_seed(5))
        assert torch.equal(released, mech.decode(noisy, x, space=space))
        again = exposed_noise(mech, x, space, torch.Generator().manual_seed(5))
        assert again.abs().sum() > 0 or isinstance(mech.guarantee(space), NoGuarantee)

    def test_draws_are_independent(self):
        """Two calls, two cells and two seeds: the noise neither repeats nor correlates."""
        mech, space, x, per_row = self._noise_setup()
        if isinstance(mech.guarantee(space), NoGuarantee):
            pytest.skip("no guarantee declared: nothing is claimed of the draws")
        calls = self.independence_draws if per_row else max(8, self.independence_draws // 8)
        tests = pair_tests(mechanism_draw(mech, x, calls, space, per_row), self.seed)  # type: ignore[attr-defined]
        bad = [t.describe() for t in tests
               if t.repeats >= 2 or t.p_value * len(tests) < INDEPENDENCE_LEVEL]
        assert not bad, "noise repeats or correlates across draws: " + "; ".join(bad)
