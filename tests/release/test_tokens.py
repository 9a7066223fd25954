"""dpkit.release.tokens: the releases of a token mechanism over documents — what each counts and
covers, by notion, and the ∞ entries of the words it passes through verbatim."""

import pytest
import torch

from dpkit.accounting import DpGuarantee, KAnonymityGuarantee, MetricDpGuarantee, NoGuarantee
from dpkit.release.declaration import Release
from dpkit.release.tokens import main_release, token_releases, verbatim_count
from dpkit.text.space import EmbeddingSpace

SPACE = EmbeddingSpace("s", [f"w{i}" for i in range(10)], torch.randn(10, 3))
DOCS = [torch.tensor([1, 0, -1, 4]), torch.tensor([-1, -1]), torch.tensor([2, 2, 0, 5, 6]),
        torch.tensor([7])]  # known tokens per document: 3, 0, 5, 1 (9 in all); 3 out of vocabulary


class Mechanism:
    name = "mech"

    def __init__(self, guarantee):
        self._guarantee = guarantee

    def guarantee(self, space):
        assert space is SPACE
        return self._guarantee


class SequenceMechanism(Mechanism):
    sequence_level = True


class StopWords(Mechanism):
    """Releases id 0 verbatim (a stop word)."""

    def verbatim_mask(self, ids, space):
        assert space is SPACE and bool((ids >= 0).all()), "ids reach the space as indices"
        return (ids == 0).long()


def fields(release: Release) -> tuple:
    return (release.name, release.label, release.count, release.covers, release.unit,
            release.padding)


@pytest.mark.parametrize("guarantee", [DpGuarantee.pure(1.0), KAnonymityGuarantee(3, 2, 0.1, 1.0)])
def test_per_document_notions_count_the_longest_document_and_cover_every_token(guarantee):
    rows = main_release(Mechanism(guarantee), SPACE, DOCS, "embeddings")
    assert rows.guarantee == guarantee
    assert fields(rows) == ("embeddings", "mech (per document: up to 5 tokens composed)", 5, 9,
                            "row", 0.0)
    ids = main_release(Mechanism(guarantee), SPACE, DOCS, "substituted_ids")
    assert fields(ids) == ("substituted_ids", "mech (per document: up to 5 tokens composed)", 5,
                           9, "element", -1)
    for docs in ([torch.tensor([-1])], []):
        nothing = main_release(Mechanism(guarantee), SPACE, docs, "other")
        assert fields(nothing) == ("other", "mech (per document: up to 0 tokens composed)", 0,
                                   0, "element", None)
        assert nothing.limit == 0


def test_per_token_metric_dp_counts_every_known_token():
    eta = MetricDpGuarantee(5.0, "l2", "s")
    rows = main_release(Mechanism(eta), SPACE, DOCS, "embeddings")
    assert rows.guarantee == eta
    assert fields(rows) == ("embeddings", "mech (tokens)", 9, None, "row", 0.0)
    ids = main_release(Mechanism(eta), SPACE, DOCS, "substituted_ids")
    assert fields(ids) == ("substituted_ids", "mech (tokens)", 9, None, "element", -1)


@pytest.mark.parametrize("mechanism", [Mechanism(MetricDpGuarantee(5.0, "l2", "s", "sequence")),
                                       SequenceMechanism(MetricDpGuarantee(5.0, "l2", "s")),
                                       SequenceMechanism(NoGuarantee("noiseless"))])
def test_sequence_level_mechanisms_count_the_documents_that_hold_a_known_token(mechanism):
    docs = main_release(mechanism, SPACE, DOCS, "embeddings")
    assert fields(docs) == ("embeddings", "mech (documents)", 3, None, "group", 0.0)
    assert docs.guarantee == mechanism.guarantee(SPACE)


def test_verbatim_tokens_are_counted_among_known_tokens_only():
    assert verbatim_count(StopWords(MetricDpGuarantee(5.0)), SPACE, DOCS) == 2
    assert verbatim_count(StopWords(MetricDpGuarantee(5.0)), SPACE, []) == 0
    assert verbatim_count(Mechanism(MetricDpGuarantee(5.0)), SPACE, DOCS) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_verbatim_words_are_looked_up_on_the_device_of_the_space():
    space = EmbeddingSpace("s", SPACE.tokens, SPACE.vectors.cuda())

    class OnDevice(StopWords):
        def verbatim_mask(self, ids, space):
            assert ids.device == space.vectors.device
            return ids == 0

    assert verbatim_count(OnDevice(MetricDpGuarantee(5.0)), space, DOCS) == 2


def test_words_released_verbatim_each_get_an_infinite_release_naming_how_many():
    main, verbatim, oov = token_releases(StopWords(MetricDpGuarantee(5.0, "l2", "s")), SPACE,
                                         DOCS, "embeddings")
    assert main == main_release(StopWords(MetricDpGuarantee(5.0, "l2", "s")), SPACE, DOCS,
                                "embeddings")
    assert verbatim == Release.uncovered(
        "verbatim_tokens", "2 tokens released verbatim by mech's policy (stop words or words "
        "without an output set)", count=2)
    assert oov == Release.uncovered("oov_words", "3 out-of-vocabulary tokens released verbatim "
                                    "(oov: keep)", count=3)
    clean = [torch.tensor([1, 2]), torch.tensor([3])]
    assert [r.name for r in token_releases(StopWords(MetricDpGuarantee(5.0)), SPACE, clean,
                                           "embeddings")] == ["embeddings"]
