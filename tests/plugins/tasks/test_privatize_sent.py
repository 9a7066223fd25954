"""privatize_text's client, without a run: every in-vocabulary token is privatized exactly once
from the run's noise secret, what crosses the wire carries those tokens and nothing else, padded
per document with the declared padding, and the declaration counts what crosses."""

from __future__ import annotations

import pytest
import torch
from dpkit_tasks.privatize import PrivatizeText, padded, wire_message

from dpkit.contract.plugins import get_registry
from dpkit.data.types import TextDataset, TextSplit
from dpkit.testing.params_contract import tiny_context
from dpkit.testing.strategies_tokens import random_space
from dpkit.text.search import VocabIndex

SPACE = random_space(64, 8, 0, stop_words=True)
OOV = -1
DOCS = [torch.tensor([5, OOV, 9, 0]), torch.tensor([OOV]), torch.tensor([0, 30, 41, 41, 8, OOV]),
        torch.tensor([60])]  # id 0 is a word like any other
TRUTH = torch.cat(DOCS)
KNOWN = TRUTH >= 0


class RowNoise:
    """A per-token embedding mechanism of no shared stream: Gaussian noise on each row."""

    name = "row_noise"
    domain = "embedding"

    def __init__(self):
        self.calls: list[int] = []

    def privatize(self, x, *, space, generator):
        assert space is SPACE, "the mechanism is handed the defense's space"
        self.calls.append(len(x))
        return x + torch.randn(x.shape, generator=generator)


class DocumentNoise(RowNoise):
    """The same, stated per document (a sequence-level mechanism)."""

    name = "document_noise"
    sequence_level = True


class OnItsDevice:
    """Noise drawn as a GPU mechanism draws it: on its input's device, which must be the
    generator's and the space's; a token mechanism substitutes random ids for the known ones."""

    name = "on_its_device"

    def __init__(self, domain: str, sequence_level: bool):
        self.domain, self.sequence_level = domain, sequence_level

    def privatize(self, x, *, space, generator):
        assert x.device.type == generator.device.type == space.vectors.device.type, (
            f"input on {x.device}, generator on {generator.device}, space on {space.vectors.device}")
        if self.domain == "token":
            drawn = torch.randint(space.size, x.shape, generator=generator, device=x.device)
            return torch.where(x >= 0, drawn, x)
        return x + torch.randn(x.shape, generator=generator, device=x.device)


def defense(mechanism="laplace_dx", params=None, **task) -> PrivatizeText:
    return get_registry().build("defense", "privatize_text", {
        "mechanism": mechanism, "mechanism_params": params or {"eta": 3.0}, **task})


def mechanism(name, **params):
    return get_registry().build("mechanism", name, params)


def privatized(mech, ctx=None, docs=DOCS, **task):
    ctx = ctx or tiny_context(SPACE, None)
    truth = torch.cat(docs) if docs else torch.zeros(0, dtype=torch.long)
    return defense(**task)._privatize(ctx, mech, SPACE, docs, truth)


# ---- padded -------------------------------------------------------------------------------

def test_padded_groups_consecutive_rows_per_document_closed_by_the_padding():
    rows = torch.arange(12.0).reshape(6, 2)
    out = padded(rows, [2, 0, 3, 1], -7.0)
    assert out.shape == (4, 3, 2) and out.dtype == rows.dtype
    start = 0
    for i, n in enumerate([2, 0, 3, 1]):
        assert torch.equal(out[i, :n], rows[start:start + n])
        assert bool((out[i, n:] == -7.0).all())
        start += n
    wide = padded(rows.double(), [2, 4], 0.0)
    assert wide.dtype == torch.float64 and torch.equal(wide[1, :4], rows[2:].double())
    ids = padded(torch.tensor([4, 5, 6]), [1, 2], -1)
    assert ids.dtype == torch.long and torch.equal(ids, torch.tensor([[4, -1], [5, 6]]))
    assert padded(torch.zeros(0, 3), [], 0.0).shape == (0, 0, 3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_padded_stays_on_the_cuda_device_of_the_rows():
    rows = torch.arange(12.0).reshape(6, 2)
    out = padded(rows.cuda(), [2, 0, 3, 1], -7.0)
    assert out.device.type == "cuda" and torch.equal(out.cpu(), padded(rows, [2, 0, 3, 1], -7.0))


# ---- wire_message: what crosses ---------------------------------------------------------------

def test_the_message_carries_each_documents_known_noisy_rows_and_only_them():
    noisy = torch.randn(len(TRUTH), 8)
    name, message, per_doc = wire_message(DOCS, TRUTH.clone(), noisy)
    assert name == "embeddings" and per_doc == [3, 0, 5, 1]
    assert message.shape == (4, 5, 8)
    assert torch.equal(message[message.abs().sum(-1) > 0], noisy[KNOWN])  # in order, OOV left out
    assert int((message.abs().sum(-1) > 0).sum()) == int(KNOWN.sum())
    assert bool((message[0, 3:] == 0.0).all()) and bool((message[1] == 0.0).all())


def test_substituted_ids_cross_padded_with_minus_one_out_of_vocabulary_words_left_out():
    substituted = TRUTH.clone()
    substituted[KNOWN] = torch.arange(int(KNOWN.sum())) + 2
    name, message, per_doc = wire_message(DOCS, substituted, None)
    assert name == "substituted_ids" and per_doc == [3, 0, 5, 1]
    assert torch.equal(message[message >= 0], substituted[KNOWN])
    assert int((message == -1).sum()) == message.numel() - int(KNOWN.sum())
    assert wire_message([], torch.zeros(0, dtype=torch.long), None)[2] == []


def test_an_out_of_vocabulary_word_never_crosses_whatever_the_mechanism_made_of_it():
    substituted = TRUTH.clone()
    substituted[~KNOWN] = 3  # a mechanism that substituted the unknown words too
    noisy = torch.randn(len(TRUTH), 8)
    for output in (None, noisy):
        _, message, per_doc = wire_message(DOCS, substituted, output)
        assert per_doc == [3, 0, 5, 1] and message.shape[:2] == (4, 5)
    _, message, _ = wire_message(DOCS, substituted, None)
    assert torch.equal(message[message >= 0], substituted[KNOWN])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_message_is_built_on_the_privatized_tokens_device_wherever_the_documents_are_cuda():
    noisy = torch.randn(len(TRUTH), 8)
    for docs_on, output_on in (("cuda", "cpu"), ("cpu", "cuda")):
        docs = [d.to(docs_on) for d in DOCS]
        for output in (noisy, None):
            expected = wire_message(DOCS, TRUTH.clone(), output)
            name, message, per_doc = wire_message(docs, TRUTH.to(output_on),
                                                  None if output is None else output.to(output_on))
            assert message.device.type == output_on
            assert (name, per_doc) == (expected[0], expected[2])
            assert torch.equal(message.cpu(), expected[1])


# ---- _privatize: every known token once, from the secret ----------------------------------------

def test_a_per_token_embedding_mechanism_noises_all_known_rows_in_one_draw():
    mech, ctx = RowNoise(), tiny_context(SPACE, None)
    substituted, noisy = privatized(mech, ctx)
    assert mech.calls == [int(KNOWN.sum())]
    gen = ctx.noise_generator("privatize_text/row_noise")
    torch.testing.assert_close(noisy[KNOWN], RowNoise().privatize(SPACE.vectors[TRUTH[KNOWN]],
                                                                  space=SPACE, generator=gen))
    assert bool((noisy[~KNOWN] == 0).all()) and noisy.shape == (len(TRUTH), 8)
    nearest = VocabIndex(SPACE.vectors, "l2").search(noisy[KNOWN], 1)[1][:, 0]
    assert torch.equal(substituted[KNOWN], nearest)
    assert bool((substituted[~KNOWN] == OOV).all())


def test_the_decoding_metric_is_the_defenses():
    mech = RowNoise()
    substituted, noisy = privatized(mech, decode_metric="cosine")
    nearest = VocabIndex(SPACE.vectors, "cosine").search(noisy[KNOWN], 1)[1][:, 0]
    assert torch.equal(substituted[KNOWN], nearest)


def test_a_sequence_level_mechanism_is_run_document_by_document():
    mech, ctx = DocumentNoise(), tiny_context(SPACE, None)
    _, noisy = privatized(mech, ctx)
    assert mech.calls == [3, 5, 1]  # one call per document with a known token
    gen = ctx.noise_generator("privatize_text/document_noise")
    again = DocumentNoise()
    expected = torch.cat([again.privatize(SPACE.vectors[d[d >= 0]], space=SPACE, generator=gen)
                          for d in DOCS if bool((d >= 0).any())])
    torch.testing.assert_close(noisy[KNOWN], expected)
    assert bool((noisy[~KNOWN] == 0).all())


def test_laplace_dx_and_its_token_decoding_share_one_draw_per_token():
    vectors, _ = privatized(mechanism("laplace_dx", eta=1.0))
    tokens, none = privatized(mechanism("text2text", eta=1.0))
    assert none is None and torch.equal(tokens, vectors)
    assert 0.1 < float((vectors[KNOWN] != TRUTH[KNOWN]).float().mean()) < 0.9


def test_a_shared_stream_is_drawn_document_by_document():
    mech, ctx = mechanism("laplace_dx", eta=4.0), tiny_context(SPACE, None)
    _, noisy = privatized(mech, ctx)
    gen = ctx.noise_generator(f"privatize_text/{mech.noise_stream}")
    expected = torch.cat([mech.privatize(SPACE.vectors[d[d >= 0]], space=SPACE, generator=gen)
                          for d in DOCS if bool((d >= 0).any())])
    torch.testing.assert_close(noisy[KNOWN], expected)


def test_a_per_token_token_mechanism_substitutes_in_one_draw():
    mech, ctx = mechanism("santext", epsilon=2.0), tiny_context(SPACE, None)
    known_docs = [d[d >= 0] for d in DOCS]
    substituted, noisy = privatized(mech, ctx, docs=known_docs)
    gen = ctx.noise_generator("privatize_text/santext")
    truth = torch.cat(known_docs)
    assert noisy is None
    assert torch.equal(substituted, mech.privatize(truth, space=SPACE, generator=gen))
    assert 0.0 < float((substituted != truth).float().mean())


def test_a_per_document_token_mechanism_substitutes_document_by_document():
    mech, ctx = mechanism("dx_stencil", eta=3.0, window=2), tiny_context(SPACE, None)
    substituted, noisy = privatized(mech, ctx)
    gen = ctx.noise_generator(f"privatize_text/{mech.noise_stream}")
    expected = torch.cat([mech.privatize(d, space=SPACE, generator=gen) for d in DOCS])
    assert noisy is None and torch.equal(substituted, expected)


def test_the_noise_comes_from_the_runs_noise_secret():
    plain, secret = tiny_context(SPACE, None), tiny_context(SPACE, None)
    secret.noise_secret = "the client's secret"
    for mech in (RowNoise(), mechanism("laplace_dx", eta=4.0)):
        _, public = privatized(mech, plain)
        _, hidden = privatized(mech, secret)
        assert not torch.allclose(public[KNOWN], hidden[KNOWN])


@pytest.mark.parametrize("mech", [RowNoise(), DocumentNoise(), mechanism("laplace_dx", eta=4.0)])
def test_documents_without_a_known_token_draw_nothing(mech):
    docs = [torch.tensor([OOV, OOV]), torch.tensor([OOV])]
    substituted, noisy = privatized(mech, docs=docs)
    assert torch.equal(substituted, torch.cat(docs)) and bool((noisy == 0).all())
    substituted, noisy = privatized(mech, docs=[])
    assert substituted.numel() == 0 and noisy.shape == (0, 8)
    assert getattr(mech, "calls", []) == []


def test_no_document_substitutes_nothing():
    substituted, noisy = privatized(mechanism("text2text", eta=4.0), docs=[])
    assert substituted.numel() == 0 and noisy is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("domain, sequence_level", [("token", True), ("embedding", True),
                                                    ("embedding", False)])
def test_privatization_runs_on_the_cells_device_wherever_the_documents_are(domain, sequence_level):
    """On a CPU or a CUDA cell, documents held on the other device give the same output, on the
    cell's device: every document is moved to the cell before the mechanism sees it."""
    def privatized_on(cell, docs_on):
        ctx = tiny_context(SPACE, None)
        ctx.device = torch.device(cell)
        docs = [d.to(docs_on) for d in DOCS]
        return defense()._privatize(ctx, OnItsDevice(domain, sequence_level), SPACE.to(cell),
                                    docs, TRUTH.to(cell))

    for cell, elsewhere in (("cuda", "cpu"), ("cpu", "cuda")):
        (substituted, noisy), (moved, moved_noisy) = (privatized_on(cell, cell),
                                                      privatized_on(cell, elsewhere))
        assert substituted.device.type == moved.device.type == cell
        assert torch.equal(moved, substituted)
        assert bool((substituted.cpu()[~KNOWN] == OOV).all())
        if domain == "embedding":
            assert noisy.device.type == moved_noisy.device.type == cell
            assert torch.equal(moved_noisy, noisy) and bool((noisy.cpu()[~KNOWN] == 0).all())
            assert bool((noisy.cpu()[KNOWN] != 0).all())


# ---- releases: the declaration counts what crosses --------------------------------------------

def toy():
    texts = ["w5 w9 zzz w12", "zzz", "w7 w30 w41 w41 w8 zzz", "w60"]
    return TextDataset("toy", {"test": TextSplit(texts, [0, 1, 0, 1])})


@pytest.mark.parametrize("name,params,sent,count", [
    ("laplace_dx", {"eta": 3.0}, "embeddings", 9),
    ("text2text", {"eta": 3.0}, "substituted_ids", 9),
    ("dx_stencil", {"eta": 3.0, "window": 2}, "substituted_ids", 3)])  # documents that carry a token
def test_the_declared_release_is_what_crosses_and_counts_it(name, params, sent, count):
    out = defense(name, params, oov="keep").releases(tiny_context(SPACE, toy()))
    main = out[0]
    assert main.name == sent and main.count == count
    assert main.guarantee.notion != "none"
