"""SnD's client privatization (Eq. 2–3): the noise it adds follows the declared Laplace law (power
against a 1.5× scale error computed by simulation), the clip bound is the largest row norm and
every upload lies in its ball, padding gets no noise, and two calls draw independent noise."""

from __future__ import annotations

import torch

from dpkit.audit.independence import dependence
from dpkit.testing.noise_contract import assert_laplace_law
from dpkit.testing.params_contract import build_component
from dpkit_baselines.laplace import clip_norms
from dpkit_snd.privatize import measured_clip_bound, privatize_tokens



def _batch(seed: int = 0, dim: int = 5):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(40, dim, generator=g) * torch.linspace(0.2, 3.0, 40).unsqueeze(1)
    ids = torch.randint(40, (8, 30), generator=g)
    mask = torch.ones(8, 30, dtype=torch.long)
    mask[:, 25:] = 0
    return table, table[ids], mask


def test_clip_bound_is_the_largest_row_norm():
    table, _, _ = _batch()
    assert measured_clip_bound(table) == float(table.norm(dim=1).max())
    assert measured_clip_bound(table) > float(table.norm(dim=1).mean()) * 1.2


def test_uploads_lie_in_the_clip_ball_and_padding_gets_no_noise():
    table, x, mask = _batch()
    bound = measured_clip_bound(table)
    mech = build_component("mechanism", "laplace_dx", {"eta": 2.0, "clip_bound": bound})
    private = privatize_tokens(mech, x, mask, space=None, generator=torch.Generator().manual_seed(1))
    keep = mask.bool()
    norms = private.x_priv[keep].norm(dim=1)
    assert float(norms.max()) <= bound * (1 + 1e-5)
    assert float(norms.max()) >= bound * (1 - 1e-5), "at η=2 some noisy rows exceed C and are clipped"
    assert torch.equal(private.x_priv[~keep], x[~keep]) and not private.noise[~keep].any()
    assert torch.equal(private.noise, private.x_priv - x)
    assert private.n_tokens == int(keep.sum())
    noisy = mech.noisy_vectors(x[keep], generator=torch.Generator().manual_seed(1))
    assert torch.allclose(private.x_priv[keep], clip_norms(noisy, bound))


def test_noise_follows_the_declared_laplace_law_with_power_against_scale_errors():
    table, x, mask = _batch(dim=5)
    eta = 3.0
    mech = build_component("mechanism", "laplace_dx", {"eta": eta})
    private = privatize_tokens(mech, x, mask, space=None, generator=torch.Generator().manual_seed(2))
    noise = private.noise[mask.bool()].double()
    assert_laplace_law(noise, eta)  # asserts its power against a 1.5× scale error first


def test_two_calls_draw_independent_noise():
    _, x, mask = _batch()
    mech = build_component("mechanism", "laplace_dx", {"eta": 3.0})
    gen = torch.Generator().manual_seed(3)
    first = privatize_tokens(mech, x, mask, space=None, generator=gen).noise[mask.bool()]
    second = privatize_tokens(mech, x, mask, space=None, generator=gen).noise[mask.bool()]
    p, repeats = dependence(first, second)
    assert repeats == 0 and p >= 1e-4, (p, repeats)


def test_eta_group_is_the_nearest_in_log_eta_and_infinity_takes_the_least_noise():
    import math

    import pytest

    from dpkit_snd.privatize import choose_group

    groups = [[50.0, 100.0], [200.0, 400.0], [1000.0]]
    assert choose_group(75.0, groups) == 0
    assert choose_group(200.0, groups) == 1 and choose_group(400.0, groups) == 1
    assert choose_group(130.0, groups) == 0      # log-distance 0.26 to 100, 0.43 to 200
    assert choose_group(150.0, groups) == 1      # 0.41 to 100, 0.29 to 200
    assert choose_group(10.0, groups) == 0 and choose_group(5000.0, groups) == 2
    assert choose_group(math.inf, groups) == 2
    assert choose_group(math.inf, [[10.0, 20.0], [5.0, 20.0]]) == 0   # ties: the first
    assert choose_group(30.0, [[10.0, 20.0], [40.0, 60.0]]) == 1       # nearer in log η
    assert choose_group(50.0, [[40.0, 60.0], [10.0, 100.0]]) == 0  # inside both: the first
    with pytest.raises(ValueError) as error:
        choose_group(5.0, [])
    assert str(error.value) == "no eta groups given; pass eta_groups such as [[50, 100], [200, 400]]"


def test_token_correlation_is_pearson_over_all_coordinates():
    import numpy as np

    g = torch.Generator().manual_seed(9)
    x = torch.randn(20, 6, generator=g)
    y = 0.5 * x + torch.randn(20, 6, generator=g) + 3.0
    from dpkit_snd.privatize import token_correlation

    expected = np.corrcoef(x.flatten().numpy(), y.flatten().numpy())[0, 1]
    assert abs(token_correlation(x, y) - expected) < 1e-9
    assert token_correlation(x, torch.zeros_like(x)) == 0.0
    tiny = token_correlation(x * 1e-3, y * 1e-3)   # norms far below 1: no clamp may bite
    assert abs(tiny - expected) < 1e-6


def test_the_mechanism_gets_the_space_and_only_real_tokens():
    """privatize_tokens hands the mechanism the space it was given (token mechanisms need it)
    and only the unmasked rows."""
    seen = {}

    class Recording:
        def privatize(self, x, *, space, generator):
            seen["space"], seen["rows"] = space, len(x)
            return x + 1.0

    _, x, mask = _batch()
    space = object()
    private = privatize_tokens(Recording(), x, mask, space=space, generator=torch.Generator())
    assert seen == {"space": space, "rows": int(mask.sum())}
    assert torch.equal(private.x_priv[mask.bool()], x[mask.bool()] + 1.0)
