"""SanText(+): output probabilities equal the formula; log-ratios stay within ε·d; sampling matches."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.text.space import EmbeddingSpace
from dpkit.testing.strategies_tokens import random_space, spaces
from dpkit_baselines.santext import SanText, SanTextPlus


def max_log_ratio_excess(mech, space, eps):
    """max over x, x', y of log P(y|x) − log P(y|x') − ε·d(x, x') (≤ 0 when the bound holds)."""
    ids = torch.arange(space.size)
    logp = mech.output_log_probs(ids, space).double()
    dist = torch.cdist(space.vectors.double(), space.vectors.double())
    ratio = (logp.unsqueeze(1) - logp.unsqueeze(0)).nan_to_num(0.0).amax(-1)
    return float((ratio - eps * dist).max())


def test_probabilities_equal_the_formula():
    space = random_space(30, 5, 1)
    eps = 3.0
    mech = SanText(SanText.Params(epsilon=eps))
    ids = torch.tensor([0, 4, 29])
    d = torch.cdist(space.vectors[ids].double(), space.vectors.double())
    expected = torch.softmax(-eps * d / 2, dim=1)
    assert torch.allclose(mech.output_log_probs(ids, space).exp().double(), expected, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(spaces(max_vocab=40), st.floats(0.05, 20))
def test_log_ratio_within_eps_distance(space, eps):
    assert max_log_ratio_excess(SanText(SanText.Params(epsilon=eps)), space, eps) <= 1e-3


def test_bound_test_catches_a_dropped_half():
    """Without the 1/2 (P ∝ exp(−ε d)), the ε·d bound fails on a line of points."""
    line = EmbeddingSpace("line", [f"w{i}" for i in range(11)],
                          torch.arange(11, dtype=torch.float32).unsqueeze(1))
    eps = 1.0
    no_half = SanText(SanText.Params(epsilon=2 * eps))
    assert max_log_ratio_excess(no_half, line, eps) > 0.1
    assert max_log_ratio_excess(SanText(SanText.Params(epsilon=eps)), line, eps) <= 1e-4


def test_sampling_matches_probabilities():
    space = random_space(12, 3, 5)
    mech = SanText(SanText.Params(epsilon=2.0))
    ids = torch.full((40000,), 3)
    out = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=12).double() / len(ids)
    prob = mech.output_log_probs(torch.tensor([3]), space).exp()[0].double()
    assert float((freq - prob).abs().sum()) / 2 < 0.02


def test_guarantee_and_oov():
    space = random_space(10, 3, 0)
    mech = SanText(SanText.Params(epsilon=1.5))
    assert mech.guarantee(space) == MetricDpGuarantee(1.5, "l2", space.name, "token")
    out = mech.privatize(torch.tensor([-1, 2, -1]), space=space, generator=torch.Generator())
    assert out[0] == -1 and out[2] == -1


def test_santext_plus_sensitive_set_outputs_and_honest_guarantee():
    space = random_space(40, 4, 3)
    mech = SanTextPlus(SanTextPlus.Params(epsilon=2.0, p=0.3, sensitive_share=0.5))
    counts = torch.arange(40, 0, -1)  # word i has count 40 - i: the last 20 are least frequent
    mech.fit_counts(counts)
    sensitive = mech.sensitive_mask(space)
    assert sensitive.tolist() == [False] * 20 + [True] * 20
    logp = mech.output_log_probs(torch.arange(40), space)
    probs = logp.exp()
    assert torch.allclose(probs.sum(1), torch.ones(40, dtype=probs.dtype), atol=1e-5)
    # non-sensitive words: kept w.p. ≥ 1 − p; every other output is a sensitive word
    assert bool((probs[torch.arange(20), torch.arange(20)] >= 0.7 - 1e-6).all())
    assert float(probs[:, :20].sum() - probs[torch.arange(20), torch.arange(20)].sum()) < 1e-6
    assert isinstance(mech.guarantee(space), NoGuarantee)
    # between two sensitive words the ε·d bound holds
    sub = logp[20:].double()
    dist = torch.cdist(space.vectors[20:].double(), space.vectors[20:].double())
    ratio = (sub.unsqueeze(1) - sub.unsqueeze(0)).nan_to_num(0.0).amax(-1)
    assert float((ratio - 2.0 * dist).max()) <= 1e-4
    full = SanTextPlus(SanTextPlus.Params(epsilon=2.0, p=1.0))
    assert isinstance(full.guarantee(space), MetricDpGuarantee)


def test_santext_plus_sampling_matches_probabilities():
    space = random_space(10, 3, 7)
    mech = SanTextPlus(SanTextPlus.Params(epsilon=1.0, p=0.4, sensitive_share=0.5))
    ids = torch.full((30000,), 1)
    out = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(2))
    freq = torch.bincount(out, minlength=10).double() / len(ids)
    prob = mech.output_log_probs(torch.tensor([1]), space).exp()[0].double()
    assert float((freq - prob).abs().sum()) / 2 < 0.02


def test_sample_by_id_matches_each_row_across_blocks(monkeypatch):
    import dpkit_baselines.sampling as sampling

    monkeypatch.setattr(sampling, "MAX_BLOCK", 16)  # 2 distinct ids per block over 8 columns
    logits = torch.randn(5, 8, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([4, 0, 2, 1, 3]).repeat_interleave(6000)
    draws = sampling.sample_by_id(ids, lambda rows: torch.log_softmax(logits[rows], 1), 8,
                                  torch.Generator().manual_seed(1))
    for i in range(5):
        freq = torch.bincount(draws[ids == i], minlength=8).double() / 6000
        assert float((freq - torch.softmax(logits[i].double(), 0)).abs().sum()) / 2 < 0.03


def test_guarantee_without_a_space_names_no_space():
    assert SanText(SanText.Params(epsilon=0.7)).guarantee() == MetricDpGuarantee(0.7, "l2", "", "token")
    full = SanTextPlus(SanTextPlus.Params(epsilon=0.7, p=1.0))
    assert full.guarantee() == MetricDpGuarantee(0.7, "l2", "", "token")
    space = random_space(10, 3, 0)
    assert full.guarantee(space) == MetricDpGuarantee(0.7, "l2", space.name, "token")


def test_privatize_refuses_a_missing_space():
    for mech in (SanText(SanText.Params(epsilon=1.0)), SanTextPlus(SanTextPlus.Params(epsilon=1.0))):
        with pytest.raises(ValueError, match=rf"^{mech.name} needs the embedding space \(space=\.\.\.\)$"):
            mech.privatize(torch.tensor([1]), space=None, generator=torch.Generator())


def test_token_zero_is_resampled_with_its_law():
    space = random_space(8, 3, 11, scale=0.3)
    mech = SanText(SanText.Params(epsilon=1.0))
    out = mech.privatize(torch.zeros(20000, dtype=torch.long), space=space,
                         generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=8).double() / len(out)
    prob = mech.output_log_probs(torch.tensor([0]), space).exp()[0].double()
    assert float((freq - prob).abs().sum()) / 2 < 0.02


@pytest.mark.parametrize("mech", [SanText(SanText.Params(epsilon=1.0)),
                                  SanTextPlus(SanTextPlus.Params(epsilon=1.0, p=0.5,
                                                                 sensitive_share=0.5))])
def test_draws_come_from_the_generator_only(mech):
    space = random_space(20, 3, 12)
    ids = torch.arange(20).repeat(10)
    a = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(7))
    torch.manual_seed(123)  # the global stream must not matter
    b = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    assert not torch.equal(a, mech.privatize(ids, space=space,
                                             generator=torch.Generator().manual_seed(8)))


def test_santext_plus_sensitive_words_are_the_least_counted_and_at_least_one():
    space = random_space(40, 3, 0)
    counts = torch.randperm(40, generator=torch.Generator().manual_seed(9)) + 1
    rarest = torch.argsort(counts)
    mech = SanTextPlus(SanTextPlus.Params(epsilon=1.0, sensitive_share=0.01))  # 0.4 words
    mech.fit_counts(counts)
    assert torch.nonzero(mech.sensitive_mask(space)).squeeze(1).tolist() == [int(rarest[0])]
    mech = SanTextPlus(SanTextPlus.Params(epsilon=1.0, sensitive_share=0.04))  # 1.6 words
    mech.fit_counts(counts)
    assert torch.nonzero(mech.sensitive_mask(space)).squeeze(1).tolist() == sorted(
        rarest[:2].tolist())


def test_santext_plus_no_guarantee_says_why():
    g = SanTextPlus(SanTextPlus.Params(epsilon=2.0, p=0.3)).guarantee(random_space(10, 3, 0))
    assert g == NoGuarantee(
        "SanText+ (p=0.3) keeps a non-sensitive word unchanged with probability 0.70, so its "
        "output identifies it; ε=2.0·d holds only between two sensitive words (UMLDP), not as "
        "dχ over the vocabulary")


def test_santext_plus_p_zero_keeps_non_sensitive_words_even_at_a_zero_uniform(monkeypatch):
    space = random_space(20, 3, 13)
    mech = SanTextPlus(SanTextPlus.Params(epsilon=1.0, p=0.0, sensitive_share=0.5))
    real_rand = torch.rand

    def rand(*size, generator=None, device=None, dtype=None):
        """torch.rand at the bottom of its range: every uniform is 0."""
        return torch.zeros_like(real_rand(*size, generator=generator, device=device, dtype=dtype))

    monkeypatch.setattr(torch, "rand", rand)
    ids = torch.arange(20)
    out = mech.privatize(ids, space=space, generator=torch.Generator().manual_seed(0))
    sensitive = mech.sensitive_mask(space)
    assert torch.equal(out[~sensitive], ids[~sensitive])
    assert bool(sensitive[out[sensitive]].all())



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("plus", [False, True])
def test_the_law_and_the_draws_are_the_cuda_spaces_wherever_the_ids_are(plus):
    """Ids on either device: the exact law is the CPU one, on the space's device, and the draws are
    made there from the cell's generator (−1 passes through); SanText+'s counts stay on the CPU."""
    if plus:
        mech = SanTextPlus(SanTextPlus.Params(epsilon=2.0, p=0.6, sensitive_share=0.3))
        mech.fit_counts(torch.arange(20).flip(0))
    else:
        mech = SanText(SanText.Params(epsilon=2.0))
    space, ids = random_space(20, 3, 4), torch.tensor([0, 3, -1, 7, 19, 3])
    known = ids >= 0
    law = mech.output_log_probs(ids[known], space)
    for space_on, ids_on in (("cuda", "cpu"), ("cpu", "cuda"), ("cuda", "cuda")):
        there = space.to(space_on)
        got = mech.output_log_probs(ids[known].to(ids_on), there)
        assert got.device.type == space_on
        torch.testing.assert_close(got.cpu(), law)
        out = mech.privatize(ids.to(ids_on), space=there,
                             generator=torch.Generator(device=space_on).manual_seed(1))
        assert out.device.type == space_on and int(out[2]) == -1
        assert bool(law.exp()[torch.arange(5), out.cpu()[known]].gt(0).all())  # a possible output
