"""Post-processing of the releases into student targets: James–Stein shrinkage, soft targets,
public-norm hidden targets."""

from __future__ import annotations

import torch
from dpkit_dped.targets import hidden_targets, shrink_to_prior, nonnegative, soft_targets


def test_shrinkage_keeps_noiseless_releases_and_returns_the_prior_under_heavy_noise():
    g = torch.Generator().manual_seed(0)
    truth, prior = torch.rand(20, 3000, generator=g), torch.rand(20, 3000, generator=g)
    assert torch.equal(shrink_to_prior(truth, prior, 0.0), truth)
    noisy = prior + 1e3 * torch.randn(20, 3000, generator=g)  # no signal at all
    assert torch.equal(shrink_to_prior(noisy, prior, 1e3), prior)  # every row: the prior


def test_shrinkage_lowers_the_squared_error_of_the_raw_release():
    """Shrinking toward a nearby prior beats the unbiased release in squared error, from
    almost noiseless to noise far above the signal."""
    g = torch.Generator().manual_seed(1)
    truth = torch.rand(200, 50, generator=g)
    prior = truth + 0.3 * torch.randn(200, 50, generator=g)
    for std in (0.05, 0.3, 2.0):
        noisy = truth + std * torch.randn(200, 50, generator=g)
        raw = (noisy - truth).pow(2).sum(-1).mean()
        shrunk = (shrink_to_prior(noisy, prior, std) - truth).pow(2).sum(-1).mean()
        assert shrunk < raw


def test_soft_targets_divide_the_sum_by_the_teachers_and_make_distributions_for_cross_entropy():
    released = torch.tensor([[8.0, 2.0, -2.0], [-1.0, -3.0, -0.5]])
    mean, informative = soft_targets(released, teachers=4, noise_std=0.0, prior=None)
    torch.testing.assert_close(mean, released / 4)
    assert informative.all()
    dist = nonnegative(mean)
    torch.testing.assert_close(dist[0], torch.tensor([0.8, 0.2, 0.0]))
    torch.testing.assert_close(dist[1], torch.full((3,), 1 / 3))  # nothing positive: uniform


def test_hidden_target_keeps_the_direction_at_the_public_length():
    g = torch.Generator().manual_seed(2)
    public = 3 * torch.randn(10, 16, generator=g)
    released = 0.2 * torch.randn(10, 16, generator=g)
    target, informative = hidden_targets(released, public, clip=1.0, noise_std=0.0, shrink=True,
                                         rescale=True)
    assert informative.all()
    torch.testing.assert_close(target.norm(dim=-1), public.norm(dim=-1))
    cos = torch.nn.functional.cosine_similarity(target, released, dim=-1)
    torch.testing.assert_close(cos, torch.ones(10))
    heavy, informative = hidden_targets(released, public, clip=1.0, noise_std=1e3, shrink=True,
                                        rescale=True)
    torch.testing.assert_close(heavy, public)  # no signal left: the public vector itself
    assert not informative.any()
    assert torch.equal(hidden_targets(released, public, clip=1.0, noise_std=0.5, shrink=False,
                                      rescale=False)[0], released)


def test_pure_noise_lets_no_row_of_a_run_through():
    """The energy test is corrected over the rows shrunk together: 3,000 pure-noise rows, none
    passes (uncorrected, about four would, each carrying a share of the full noise)."""
    from dpkit_dped.targets import shrinkage_factor

    g = torch.Generator().manual_seed(4)
    prior = torch.rand(3000, 300, generator=g)
    noisy = prior + 35.0 * torch.randn(3000, 300, generator=g)
    assert not (shrinkage_factor(noisy, prior, 35.0) > 0).any()
    strong = noisy.clone()
    strong[0] += 35.0  # a row whose signal energy is as large as its noise energy
    assert (shrinkage_factor(strong, prior, 35.0) > 0).tolist()[0]
