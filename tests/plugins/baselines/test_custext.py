"""CusText(+): output sets partition the vocabulary, probabilities equal the formula, ε within a set."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import KAnonymityGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit_baselines.custext import CusText, CusTextPlus


def test_sets_partition_vocabulary_with_size_k():
    space = random_space(53, 4, 0)
    mech = CusText(CusText.Params(epsilon=1.0, top_k=10))
    group = mech.groups(space)
    sizes = torch.bincount(group)
    assert bool((group >= 0).all()) and sorted(sizes.tolist()) == [3, 10, 10, 10, 10, 10]
    g = mech.guarantee(space)
    assert g == KAnonymityGuarantee(10, 3, 3 / 53, 1.0)


def test_first_set_is_seed_and_its_nearest():
    space = random_space(30, 3, 1)
    mech = CusText(CusText.Params(epsilon=1.0, top_k=5))
    group = mech.groups(space)
    nearest = torch.cdist(space.vectors[:1], space.vectors)[0].topk(5, largest=False).indices
    assert set(torch.nonzero(group == group[0]).squeeze(1).tolist()) == set(nearest.tolist())


def test_probabilities_equal_formula():
    space = random_space(24, 3, 2)
    eps = 4.0
    mech = CusText(CusText.Params(epsilon=eps, top_k=6))
    group = mech.groups(space)
    for x in (0, 5, 17):
        members = torch.nonzero(group == group[x]).squeeze(1)
        d = (space.vectors[members] - space.vectors[x]).norm(dim=1).double()
        u = 1 - (d - d.min()) / (d.max() - d.min())
        expected = torch.zeros(24, dtype=torch.float64)
        expected[members] = torch.softmax(eps * u / 2, 0)
        got = mech.output_log_probs(torch.tensor([x]), space).exp()[0].double()
        assert torch.allclose(got, expected, atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.1, 20), st.integers(2, 8))
def test_log_ratio_within_eps_inside_a_set(seed, eps, k):
    space = random_space(30, 4, seed)
    mech = CusText(CusText.Params(epsilon=eps, top_k=k))
    group = mech.groups(space)
    logp = mech.output_log_probs(torch.arange(30), space).double()
    same = group.unsqueeze(1) == group.unsqueeze(0)
    ratio = (logp.unsqueeze(1) - logp.unsqueeze(0)).nan_to_num(0.0).amax(-1)
    assert float(ratio[same].max()) <= eps + 1e-6
    # outputs never leave the set
    assert bool((logp.exp() * (~same).double()).sum() < 1e-9)


def test_sampling_matches_probabilities():
    space = random_space(20, 3, 4)
    mech = CusText(CusText.Params(epsilon=2.0, top_k=5))
    out = mech.privatize(torch.full((30000,), 7), space=space, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=20).double() / 30000
    prob = mech.output_log_probs(torch.tensor([7]), space).exp()[0].double()
    assert float((freq - prob).abs().sum()) / 2 < 0.02


def test_custext_plus_keeps_stop_words_and_reports_k_one():
    space = random_space(40, 4, 5, stop_words=True)
    mech = CusTextPlus(CusTextPlus.Params(epsilon=0.5, top_k=6))
    ids = torch.tensor([0, 1, 2, 3, 10, -1] * 50)
    out = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(1))
    stop = ids.clone().apply_(lambda i: 0 <= i < 4).bool()
    assert torch.equal(out[stop], ids[stop]) and bool((out[ids == -1] == -1).all())
    assert bool((out[ids == 10] != 10).any())
    g = mech.guarantee(space)
    assert g.k_achieved == 1 and g.share_below_k >= 4 / 40


def test_shortlist_greedy_equals_plain_greedy():
    from dpkit_baselines.custext import build_groups

    space = random_space(300, 6, 9)
    order = torch.randperm(300, generator=torch.Generator().manual_seed(0))
    fast = build_groups(space.vectors, order, 7, shortlist=2)
    plain = build_groups(space.vectors, order, 7, shortlist=10**6)
    assert torch.equal(fast, plain)
