"""STENCIL / dχ-STENCIL in detail: the stop-word policy both ways, a single-token sequence, OOV
ids, decoding by the configured metric, the reason STENCIL claims nothing. Kills the mutants of
dpkit_stencil/mechanisms.py that the law and audit tests cannot see (tools/mutation.toml)."""

from __future__ import annotations

import torch

from dpkit.accounting import NoGuarantee
from dpkit.audit import make_test_space
from dpkit.testing.params_contract import build_component
from dpkit.text.space import EmbeddingSpace


def _space() -> EmbeddingSpace:
    base = make_test_space()
    return EmbeddingSpace("one-stop-stencil", base.tokens, base.vectors, lowercase=True,
                          stop_words=frozenset(base.tokens[:1]))


def _cosine_nearest_other(vectors: torch.Tensor, table: torch.Tensor, ids: torch.Tensor):
    sims = torch.nn.functional.normalize(vectors, dim=1) @ torch.nn.functional.normalize(table, dim=1).T
    sims[torch.arange(len(ids)), ids] = -2.0
    return sims.argmax(1)


def test_stencil_says_why_it_claims_nothing():
    guarantee = build_component("mechanism", "stencil", {}).guarantee(_space())
    assert isinstance(guarantee, NoGuarantee)
    assert guarantee.reason.startswith("STENCIL adds no noise and decodes to the nearest token "
                                       "other than the original")


def test_stop_word_policy_both_ways():
    space = _space()
    ids = torch.tensor([0, 1, -1, 5, 0])
    keep = build_component("mechanism", "stencil", {})
    assert keep.verbatim_mask(ids, space).tolist() == [True, False, False, False, True]
    drop = build_component("mechanism", "stencil", {"keep_stop_words": False})
    mask = drop.verbatim_mask(ids, space)
    assert mask.dtype == torch.bool and mask.shape == ids.shape and not mask.any()
    out_keep = keep.privatize(ids, space=space, generator=torch.Generator())
    assert out_keep[0] == 0 and out_keep[4] == 0 and out_keep[2] == -1
    out_drop = drop.privatize(ids, space=space, generator=torch.Generator())
    assert out_drop[2] == -1 and bool((out_drop[[0, 1, 3, 4]] != ids[[0, 1, 3, 4]]).all()), \
        "without keep_stop_words every known token, stop words too, goes to another token"


def test_stencil_decodes_by_cosine_to_another_token_even_alone():
    space = _space()
    mech = build_component("mechanism", "stencil", {"keep_stop_words": False})
    for ids in (torch.tensor([7]), torch.tensor([3, 9, 14, 2, 30, 41])):
        out = mech.privatize(ids, space=space, generator=torch.Generator())
        mixed = mech.clean_vectors(ids, space=space)
        assert torch.equal(out, _cosine_nearest_other(mixed, space.vectors, ids))


def test_dx_stencil_decodes_by_its_metric_including_the_original():
    space = _space()
    for metric in ("l2", "cosine"):
        mech = build_component("mechanism", "dx_stencil", {"eta": 3.0, "metric": metric,
                                                           "keep_stop_words": False})
        ids = torch.tensor([3, 9, 14, 2, 30, 41])
        noisy = mech.noisy_vectors(ids, space=space, generator=torch.Generator().manual_seed(1))
        out = mech.decode(noisy, ids, space=space)
        if metric == "l2":
            expected = torch.cdist(noisy, space.vectors).argmin(1)
        else:
            expected = (torch.nn.functional.normalize(noisy, dim=1)
                        @ torch.nn.functional.normalize(space.vectors, dim=1).T).argmax(1)
        assert torch.equal(out, expected)


def test_dx_stencil_guarantee_names_its_space_and_refuses_no_space():
    import pytest

    from dpkit.accounting import MetricDpGuarantee

    space = _space()
    mech = build_component("mechanism", "dx_stencil", {"eta": 2.0})
    c = mech.noise_contribution()
    assert mech.guarantee(space) == MetricDpGuarantee(2.0 * c, "l2", space.name, "sequence")
    assert mech.guarantee(None) == MetricDpGuarantee(2.0 * c, "l2", "", "sequence")
    with pytest.raises(ValueError, match="dx_stencil needs the embedding space"):
        mech.privatize(torch.tensor([1, 2]), space=None, generator=torch.Generator())
