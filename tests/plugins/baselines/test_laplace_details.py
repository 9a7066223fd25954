"""laplace_dx and text2text in detail: clipping only outside the ball, guarantees naming their
space and unit, the stop-word policy, the decoding metric, errors with their fix, the noiseless
ceiling (``dpkit.Noiseless``). Kills the mutants of laplace.py that the law
and audit tests cannot see (tools/mutation.toml)."""

from __future__ import annotations

import pytest
import torch

from dpkit.accounting import MetricDpGuarantee, NoGuarantee
from dpkit.audit import make_test_space
from dpkit.base.errors import AuditError
from dpkit.testing.params_contract import build_component
from dpkit.text.space import EmbeddingSpace
from dpkit import Noiseless, clip_norms


def test_clip_norms_scales_only_rows_outside_the_ball_along_the_last_axis():
    y = torch.tensor([[[3.0, 4.0], [0.3, 0.4]], [[0.0, 0.1], [6.0, 8.0]]])  # norms 5, .5, .1, 10
    out = clip_norms(y, 1.0)
    assert out.shape == y.shape
    assert torch.allclose(out.norm(dim=-1), torch.tensor([[1.0, 0.5], [0.1, 1.0]]))
    assert torch.equal(out[0, 1], y[0, 1]) and torch.equal(out[1, 0], y[1, 0])
    assert torch.allclose(out[0, 0], y[0, 0] / 5)
    assert clip_norms(y, None) is y
    small = torch.tensor([[0.03, 0.04], [0.3, 0.4]])
    assert torch.allclose(clip_norms(small, 0.1).norm(dim=-1), torch.tensor([0.05, 0.1]))


@pytest.mark.parametrize("name", ["laplace_dx", "text2text"])
def test_guarantee_names_its_space_and_is_per_token(name):
    space = make_test_space()
    mech = build_component("mechanism", name, {"eta": 3.0})
    assert mech.guarantee(space) == MetricDpGuarantee(3.0, "l2", space.name, "token")
    assert mech.guarantee(None) == MetricDpGuarantee(3.0, "l2", "", "token")


def test_laplace_dx_keeps_the_shape_of_batched_sequences():
    x = torch.randn(2, 3, 5, generator=torch.Generator().manual_seed(0))
    mech = build_component("mechanism", "laplace_dx", {"eta": 4.0})
    out = mech.privatize(x, generator=torch.Generator().manual_seed(1))
    assert out.shape == x.shape and not torch.equal(out, x)
    assert mech.clean_vectors(x).shape == (6, 5)


def test_log_density_refuses_a_clipped_mechanism_with_the_fix():
    mech = build_component("mechanism", "laplace_dx", {"eta": 4.0, "clip_bound": 2.0})
    with pytest.raises(AuditError, match="clipping puts mass on the sphere.*clip_bound unset"):
        mech.log_density(torch.zeros(1, 3), torch.ones(1, 3))


def test_text2text_needs_a_space_and_says_so():
    mech = build_component("mechanism", "text2text", {"eta": 4.0})
    with pytest.raises(ValueError) as error:
        mech.privatize(torch.tensor([1]), space=None, generator=torch.Generator())
    assert str(error.value) == "text2text needs the embedding space (space=...) to embed and decode"


def _space_with_one_stop_word() -> EmbeddingSpace:
    base = make_test_space()
    return EmbeddingSpace("one-stop", base.tokens, base.vectors, lowercase=True,
                          stop_words=frozenset(base.tokens[:1]))


def test_stop_words_are_kept_only_when_asked_and_only_known_ones():
    space = _space_with_one_stop_word()
    ids = torch.tensor([0, 1, -1, 5, 0])
    keep = build_component("mechanism", "text2text", {"eta": 0.01, "keep_stop_words": True})
    assert keep.verbatim_mask(ids, space).tolist() == [True, False, False, False, True]
    drop = build_component("mechanism", "text2text", {"eta": 0.01})
    assert not drop.verbatim_mask(ids, space).any()
    out = keep.privatize(ids, space=space, generator=torch.Generator().manual_seed(0))
    assert out[0] == 0 and out[4] == 0 and out[2] == -1
    assert (out[[1, 3]] != ids[[1, 3]]).any(), "at η = 0.01 the other tokens are resampled"


def test_a_single_token_gets_noise_too():
    space = make_test_space()
    mech = build_component("mechanism", "text2text", {"eta": 2.0})
    x = torch.tensor([3])
    noise = mech.noisy_vectors(x, space=space, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(noise, mech.clean_vectors(x, space=space))


def test_cosine_decoding_picks_the_nearest_token_by_angle():
    space = make_test_space()
    mech = build_component("mechanism", "text2text", {"eta": 1.0, "metric": "cosine"})
    x = torch.arange(10).repeat(20)
    noisy = mech.noisy_vectors(x, space=space, generator=torch.Generator().manual_seed(2))
    out = mech.decode(noisy, x, space=space)
    unit = torch.nn.functional.normalize(space.vectors, dim=1)
    expected = (torch.nn.functional.normalize(noisy, dim=1) @ unit.T).argmax(1)
    assert torch.equal(out, expected)


def test_noiseless_ceiling_sends_clean_rows_and_claims_nothing():
    none = Noiseless("snd at η = ∞ sends the token embeddings without noise", 0.5)
    assert none.bound == 0.5
    guarantee = none.guarantee()
    assert isinstance(guarantee, NoGuarantee) and "snd at η = ∞" in guarantee.reason
    x = torch.tensor([[3.0, 4.0], [0.1, 0.0]])
    out = none.privatize(x, generator=torch.Generator())
    assert torch.allclose(out, torch.tensor([[0.3, 0.4], [0.1, 0.0]])) and out.shape == x.shape
    assert torch.equal(Noiseless("x").privatize(x, generator=torch.Generator()), x)
