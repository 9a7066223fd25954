"""CusText(+): output sets partition the vocabulary, probabilities equal the formula, ε within a set."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import stop_word_mask
from dpkit.accounting import KAnonymityGuarantee
from dpkit.testing.strategies_tokens import random_space
from dpkit.text.space import EmbeddingSpace
from dpkit_baselines.custext import CusText, CusTextPlus, build_groups
from dpkit_baselines.sampling import frequency_rank


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


def assert_greedy_sets(table, group, order, k, eligible=None):
    """Each set, in creation order, is the first free word of ``order`` and its k − 1 nearest free
    words (L2); words not ``eligible`` get −1; every eligible word lands in exactly one set."""
    V = table.shape[0]
    eligible = torch.ones(V, dtype=torch.bool) if eligible is None else eligible
    assert bool((group[~eligible] == -1).all()) and bool((group[eligible] >= 0).all())
    free = eligible.clone()
    for g in range(int(group.max()) + 1):
        members = group == g
        seed = int(order[free[order]][0])
        assert bool(members[seed]) and bool(free[members].all())
        assert int(members.sum()) == min(k, int(free.sum()))
        dist = (table.double() - table[seed].double()).norm(dim=1)
        others = free & ~members
        if bool(others.any()):
            assert float(dist[members].max()) <= float(dist[others].min()) + 1e-5
        free &= ~members
    assert not bool(free.any())


def test_build_groups_is_the_greedy_nearest_partition():
    from dpkit_baselines.custext import build_groups

    space = random_space(61, 5, 21)
    table = space.vectors.clone()
    table[40:50] = table[0:10]  # exact twins: a seed's nearest free word may be its twin
    table[50:58] = 0.0  # eight equal rows (zero vectors, as for untrained words)
    order = torch.randperm(61, generator=torch.Generator().manual_seed(1))
    eligible = torch.ones(61, dtype=torch.bool)
    eligible[[3, 17, 29, 44]] = False
    for shortlist in (1, 2, 16):
        for k in (3, 6):
            assert_greedy_sets(table, build_groups(table, order, k, shortlist=shortlist), order, k)
            assert_greedy_sets(table, build_groups(table, order, k, eligible, shortlist), order, k,
                               eligible)
    assert_greedy_sets(table, build_groups(table, order, 6), order, 6)
    assert int(eligible.sum()) == 57  # the caller's mask is left alone


def test_member_table_lists_members_by_id_padded_with_minus_one():
    from dpkit_baselines.custext import member_table

    labels = torch.tensor([0] * 8 + [1] * 8 + [2] * 5 + [-1] * 5)  # 21 set members: enough for
    group = labels[torch.randperm(26, generator=torch.Generator().manual_seed(3))]  # an unstable sort
    table = member_table(group, 8)
    assert table.shape == (3, 8)
    for g in range(3):
        ids = torch.nonzero(group == g).squeeze(1)
        assert table[g, :len(ids)].tolist() == ids.tolist()  # increasing ids
        assert table[g, len(ids):].tolist() == [-1] * (8 - len(ids))
    assert member_table(torch.full((5,), -1), 4).shape == (0, 4)


def test_guarantee_counts_each_words_own_set_and_needs_the_space():
    space = random_space(13, 3, 22)
    mech = CusText(CusText.Params(epsilon=0.8, top_k=10))
    assert mech.guarantee(space) == KAnonymityGuarantee(10, 3, 3 / 13, 0.8)
    with pytest.raises(ValueError, match=r"^custext\.guarantee needs the space to report the "
                                         r"achieved k$"):
        mech.guarantee()


def test_sets_follow_k_the_counts_the_stop_word_policy_and_the_space():
    space = random_space(40, 4, 23, stop_words=True)
    first = CusText(CusText.Params(epsilon=1.0, top_k=5))
    assert_greedy_sets(space.vectors, first.groups(space), torch.arange(40), 5)
    other = CusText(CusText.Params(epsilon=1.0, top_k=4))  # the process cache is keyed by K
    assert_greedy_sets(space.vectors, other.groups(space), torch.arange(40), 4)
    counts = torch.randperm(40, generator=torch.Generator().manual_seed(4))
    first.fit_counts(counts)  # new counts, new order: the sets are rebuilt
    order = torch.sort(counts, descending=True, stable=True).indices
    assert_greedy_sets(space.vectors, first.groups(space), order, 5)
    plus = CusTextPlus(CusTextPlus.Params(epsilon=1.0, top_k=5))  # same space, K and order
    plus.fit_counts(counts)
    assert_greedy_sets(space.vectors, plus.groups(space), order, 5, ~space.stop_mask)
    small = random_space(12, 4, 24)  # the same instance on another space: its own sets
    assert_greedy_sets(small.vectors, other.groups(small), torch.arange(12), 4)
    assert_greedy_sets(space.vectors, other.groups(space), torch.arange(40), 4)


def stop_word_space(words: list[str]):
    """Ten seeded 3-d vectors for ``words``, with "the" and "of" as stop words."""
    from dpkit.text.space import EmbeddingSpace

    return EmbeddingSpace("stops-" + "-".join(words), words, torch.randn(
        10, 3, generator=torch.Generator().manual_seed(5)), stop_words=frozenset({"the", "of"}))


def test_verbatim_words_are_the_stop_words_and_their_law_is_a_point_mass():
    mech = CusTextPlus(CusTextPlus.Params(epsilon=1.0, top_k=4))
    ids = torch.tensor([-1, 0, 1, 2, 3, 9])
    for words in (["w0", "the", "w2", "of", "w4", "w5", "w6", "w7", "w8", "w9"],
                  ["the", "w1", "w2", "of", "w4", "w5", "w6", "w7", "w8", "w9"]):
        space = stop_word_space(words)
        stop = torch.tensor([w in ("the", "of") for w in words])
        assert mech.verbatim_mask(ids, space).tolist() == [False] + stop[ids[1:]].tolist()
        assert not bool(CusText(CusText.Params(epsilon=1.0, top_k=4)).verbatim_mask(ids, space).any())
        law = mech.output_log_probs(torch.nonzero(stop).squeeze(1), space)
        for row, word in zip(law, torch.nonzero(stop).squeeze(1).tolist()):
            assert float(row[word]) == 0.0 and bool(torch.isinf(row[torch.arange(10) != word]).all())
        # word 0 through privatize: kept if a stop word, else drawn from its own set
        out = mech.privatize(torch.zeros(4000, dtype=torch.long), space=space,
                             generator=torch.Generator().manual_seed(6))
        if bool(stop[0]):
            assert bool((out == 0).all())
        else:
            group = mech.groups(space)
            assert bool((group[out] == group[0]).all()) and bool((out != 0).any())


@pytest.mark.parametrize("vocab,last", [(21, 1), (23, 3)])  # 4 sets of 5, then the last set
def test_law_is_min_max_normalised_at_small_scale_in_full_and_padded_sets(vocab, last):
    space = random_space(vocab, 3, 25, scale=0.05)  # set diameters well below 1
    eps = 6.0
    mech = CusText(CusText.Params(epsilon=eps, top_k=5))
    group = mech.groups(space)
    assert sorted(torch.bincount(group).tolist()) == [last] + [5] * 4
    law = mech.output_log_probs(torch.arange(vocab), space).exp().double()
    for x in range(vocab):
        members = torch.nonzero(group == group[x]).squeeze(1)
        expected = torch.zeros(vocab, dtype=torch.float64)
        if len(members) == 1:  # a singleton keeps its word
            expected[x] = 1.0
        else:
            d = (space.vectors[members] - space.vectors[x]).norm(dim=1).double()
            expected[members] = torch.softmax(eps * (1 - (d - d.min()) / (d.max() - d.min())) / 2, 0)
        assert torch.allclose(law[x], expected, atol=1e-6)


def test_privatize_draws_word_zero_from_its_set_and_from_the_generator_only():
    space = random_space(20, 3, 26)
    mech = CusText(CusText.Params(epsilon=2.0, top_k=5))
    ids = torch.zeros(20000, dtype=torch.long)  # word 0 seeds set 0
    a = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(7))
    freq = torch.bincount(a, minlength=20).double() / len(ids)
    prob = mech.output_log_probs(torch.tensor([0]), space).exp()[0].double()
    assert float((freq - prob).abs().sum()) / 2 < 0.02
    torch.manual_seed(123)  # the global stream must not matter
    b = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    with pytest.raises(ValueError, match=r"^custext needs the embedding space \(space=\.\.\.\)$"):
        mech.privatize(ids, space=None, generator=torch.Generator())



def _renamed(space: EmbeddingSpace, device: str) -> EmbeddingSpace:
    """The space on ``device`` under a name of its own: output sets are cached by content, so a
    device's sets are built from (and kept on) that device."""
    return EmbeddingSpace(f"{space.name}@{device}", space.tokens, space.vectors.to(device),
                          space.lowercase, space.stop_words)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("cls", [CusText, CusTextPlus])
def test_sets_law_and_draws_of_a_cuda_space_are_the_cpu_ones_on_its_device(cls):
    """A CUDA space's output sets are built on the GPU and equal the CPU's; the exact law and the
    verbatim words are the CPU ones, the law on the space's device and the mask on the ids';
    privatized ids stay in their word's set (−1 and verbatim words pass through)."""
    space = random_space(41, 3, 77, stop_words=True)
    order = frequency_rank(space, None)
    eligible = ~stop_word_mask(space) if cls.keep_stop_words else None
    sets = build_groups(space.vectors, order, 5, eligible)
    on_cuda = build_groups(space.vectors.cuda(), order.cuda(), 5,
                           None if eligible is None else eligible.cuda())
    assert on_cuda.device.type == "cuda" and torch.equal(on_cuda.cpu(), sets)
    mech = cls(cls.Params(epsilon=2.0, top_k=5))
    cpu, gpu = _renamed(space, "cpu"), _renamed(space, "cuda")
    ids = torch.tensor([0, 1, 5, -1, 17, 40, 5])
    law = mech.output_log_probs(ids.clamp_min(0), cpu)
    verbatim = mech.verbatim_mask(ids, cpu)
    assert bool(verbatim.any()) == cls.keep_stop_words
    for ids_on in ("cpu", "cuda"):
        here = ids.to(ids_on)
        got = mech.output_log_probs(here.clamp_min(0), gpu)
        assert got.device.type == "cuda"
        torch.testing.assert_close(got.cpu(), law)
        mask = mech.verbatim_mask(here, gpu)
        assert mask.device.type == ids_on and torch.equal(mask.cpu(), verbatim)
        out = mech.privatize(here, space=gpu, generator=torch.Generator(device="cuda").manual_seed(3))
        assert out.device.type == "cuda" and int(out[3]) == -1
        assert torch.equal(out.cpu()[verbatim], ids[verbatim])
        assert torch.equal(sets[out.cpu()[ids >= 0]], sets[ids[ids >= 0]])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("cls", [CusText, CusTextPlus])
def test_one_space_on_the_cpu_then_on_cuda_has_one_exact_law(cls):
    """The output sets are cached by the space's fingerprint, whatever its device: the exact law
    of a space's CUDA copy, asked after its CPU copy's, is the same law, on the CUDA device."""
    space = random_space(41, 3, 77, stop_words=True)
    mech = cls(cls.Params(epsilon=2.0, top_k=5))
    ids = torch.tensor([0, 1, 5, 17, 40])
    law = mech.output_log_probs(ids, space)
    got = mech.output_log_probs(ids.cuda(), space.to("cuda"))
    assert got.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), law)
