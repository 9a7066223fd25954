"""Shared set-up of every DPED-family defense: corpora, vocabulary, cached models, evaluation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from dpkit import process_cache
from dpkit_dped.aggregation import (
    procrustes_align,
    teacher_probability_sum,
    teacher_votes,
    vote_histogram,
)
from dpkit_dped.corpus import (
    Vocabulary,
    build_vocabulary,
    encode,
    partition,
    sentences,
    shard_of,
    skipgram_pairs,
)
from dpkit_dped.evaluation import (
    analogy_accuracy,
    bag_matrix,
    pair_spearman,
    quintile_similarity,
    topic_accuracy,
)
from dpkit_dped.scores import model_scores
from dpkit_dped.server import PUBLIC_STREAM, gensim_settings
from dpkit_dped.skipgram import WordModel, cache_key, cached_models, train_gensim
from dpkit_dped.sources import all_analogy_questions, load_benchmark, texts_of


@dataclass
class Setup:
    """One cell's corpora: public vocabulary, private training documents, validation and test pairs.

    ``validation`` pairs come from private training documents set aside by a keyed hash (never
    trained on, never test); they score training curves only.
    """

    key: str
    vocab: Vocabulary
    public_texts: list[str]
    private_texts: list[str]
    heldout: tuple[torch.Tensor, torch.Tensor]
    private_counts: torch.Tensor
    validation: tuple[torch.Tensor, torch.Tensor]


VALIDATION_BINS = 10_000


def split_validation(texts: list[str], share: float, seed: int) -> tuple[list[str], list[str]]:
    """(training, validation) documents: a keyed hash of each document puts ``share`` aside."""
    cut = round(share * VALIDATION_BINS)
    keep, aside = [], []
    for t in texts:
        (aside if shard_of(t, VALIDATION_BINS, seed) < cut else keep).append(t)
    return keep, aside


_SETUPS = process_cache("dped.setups", "cut corpora and vocabulary by (data, cut params, seed)",
                        max_entries=4)


def prepare(ctx, p) -> Setup:
    """Load and cut the corpora named in params ``p`` (memoized per process)."""
    private = ctx.dataset
    public = ctx.load_dataset(p.public_data, p.public_data_params)
    key = cache_key("setup", private.fingerprint, public.fingerprint, p.public_split,
                    p.max_public_docs, p.max_private_docs, p.heldout_pairs, p.vocab_size,
                    p.min_count, p.window, p.validation_share, p.validation_pairs, ctx.seed)
    return _SETUPS.get_or_build(key, lambda: _build_setup(ctx, p, public, key))


def _build_setup(ctx, p, public, key: str) -> Setup:
    private = ctx.dataset
    public_texts = texts_of(public, p.public_split, p.max_public_docs)
    vocab = build_vocabulary(public_texts, p.vocab_size, p.min_count)
    train, aside = split_validation(texts_of(private, p.private_split, p.max_private_docs),
                                    p.validation_share, ctx.numpy_seed("dped-validation"))
    test_docs = encode(texts_of(private, p.heldout_split), vocab)
    rng = np.random.default_rng(ctx.numpy_seed("dped-heldout"))
    heldout = skipgram_pairs(test_docs, p.window, p.heldout_pairs, rng)
    validation = skipgram_pairs(encode(aside, vocab), p.window, p.validation_pairs, rng)
    counts = np.bincount(np.concatenate(encode(train, vocab) + [np.zeros(0, np.int64)]),
                         minlength=len(vocab))
    return Setup(key, vocab, public_texts, train, heldout,
                 torch.from_numpy(counts.astype(np.float32)), validation)


def gensim_kwargs(p, ctx, stream: str) -> dict:
    """Skip-gram hyper-parameters of a model trained by the client on seed stream ``stream``."""
    return gensim_settings(p, ctx.numpy_seed(stream))


CURVE_FORMAT = 2  # bump when what a cached model's training curve records changes


def training_settings(p) -> tuple:
    """Everything besides the data that determines a gensim model (part of every cache key)."""
    return (p.dim, p.epochs, p.negative, p.workers, CURVE_FORMAT)


def single_model(ctx, setup: Setup, p, which: str, texts: list[str],
                 settings: dict | None = None) -> WordModel:
    """One skip-gram on ``texts`` with the shared settings (``settings``: other seeds), cached
    under ``which``."""
    seeded = () if settings is None else (settings["seed"],)
    settings = settings or gensim_kwargs(p, ctx, f"dped-{which}")
    folder = ctx.artifact_dir("dped", cache_key(which, setup.key, *training_settings(p), *seeded))

    def build() -> list[WordModel]:
        ctx.say(f"training the {which} skip-gram on {len(texts)} documents")
        return [train_gensim(sentences(texts, setup.vocab), setup.vocab, validation=setup.validation,
                             component=f"{which} skip-gram", **settings)]

    return cached_models(folder, build)[0].to(ctx.device)


def public_model(ctx, setup: Setup, p) -> WordModel:
    """Skip-gram on the public corpus alone (alignment reference; the public-only baseline): the
    one the cell's server trains for the student (:func:`dpkit_dped.server.public_start`), with
    the seed the server gets."""
    return single_model(ctx, setup, p, "public", setup.public_texts,
                        gensim_settings(p, ctx.server_numpy_seed(PUBLIC_STREAM)))


def nonprivate_model(ctx, setup: Setup, p) -> WordModel:
    """Skip-gram on the whole private training corpus (no privacy)."""
    return single_model(ctx, setup, p, "nonprivate", setup.private_texts)


def teacher_key(ctx, setup: Setup, p) -> str:
    """The cache key of the teachers of this cell's setup and teacher settings."""
    patience = getattr(p, "teacher_patience", None)
    epochs = getattr(p, "teacher_epochs", None) or p.epochs
    stopping = () if patience is None else ("stop", patience, p.teacher_holdout_share)
    if epochs != p.epochs:
        stopping += ("epochs", epochs)
    return cache_key("teachers", setup.key, p.teachers, *training_settings(p),
                     ctx.numpy_seed("dped-shards"), *stopping)


def teacher_models(ctx, setup: Setup, p) -> list[WordModel]:
    """N teachers, each trained on its own disjoint shard of the private corpus.

    They train ``teacher_epochs`` (default: ``epochs``, as every other skip-gram). With
    ``teacher_patience`` set, each teacher holds out ``teacher_holdout_share`` of its own shard's
    documents and stops on their loss: a document still reaches exactly one teacher, so the
    aggregation's sensitivity is unchanged.
    """
    shard_seed = ctx.numpy_seed("dped-shards")
    patience = getattr(p, "teacher_patience", None)
    epochs = getattr(p, "teacher_epochs", None) or p.epochs
    folder = ctx.artifact_dir("dped", teacher_key(ctx, setup, p))

    def build() -> list[WordModel]:
        shards = partition(setup.private_texts, p.teachers, shard_seed)
        out = []
        for i, shard in enumerate(shards):
            texts, holdout = [setup.private_texts[j] for j in shard], None
            if patience is not None:
                texts, aside = split_validation(texts, p.teacher_holdout_share,
                                                ctx.numpy_seed(f"dped-teacher-holdout-{i}"))
                rng = np.random.default_rng(ctx.numpy_seed(f"dped-teacher-pairs-{i}"))
                holdout = skipgram_pairs(encode(aside, setup.vocab), p.window, p.validation_pairs,
                                         rng)
            ctx.say(f"training teacher {i + 1}/{p.teachers} on {len(texts)} documents")
            out.append(train_gensim(sentences(texts, setup.vocab), setup.vocab,
                                    validation=setup.validation, component=f"teacher {i + 1}",
                                    patience=patience, holdout=holdout,
                                    **{**gensim_kwargs(p, ctx, "dped-teachers"), "epochs": epochs}))
        return out

    return [t.to(ctx.device) for t in cached_models(folder, build)]


_OUTPUTS = process_cache("dped.teacher_outputs", "teachers' summed outputs and aligned vectors by "
                         "(teachers, queries, target)", max_entries=12)


def teacher_outputs(ctx, setup: Setup, p, *, soft: bool, hidden: bool
                    ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(summed outputs ``[M, V]``, aligned teacher vectors ``[N, M, d]`` or None) of the first
    ``num_queries`` words: the same for every ε of a seed, so computed once per process."""
    key = (teacher_key(ctx, setup, p), p.num_queries, soft, hidden, str(ctx.device))

    def build() -> tuple[torch.Tensor, torch.Tensor | None]:
        reference, teachers = public_model(ctx, setup, p), teacher_models(ctx, setup, p)
        queries = torch.arange(p.num_queries, device=ctx.device)
        summed = (teacher_probability_sum(teachers, queries) if soft
                  else vote_histogram(teacher_votes(teachers, queries), len(setup.vocab)))
        vectors = None
        if hidden:
            vectors = torch.stack([procrustes_align(t.vectors, reference.vectors)[:p.num_queries]
                                   for t in teachers])
        return summed, vectors

    return _OUTPUTS.get_or_build(cache_key(*key), build)


_BAGS = process_cache("dped.topic_bags", "bags of words of the labelled corpus by (setup, data)",
                      max_entries=4)


def topic_bags(ctx, setup: Setup, p) -> tuple[tuple, tuple]:
    """(bag matrix, labels) of the labelled corpus's train and test splits, memoized."""
    key = cache_key(setup.key, p.topic_data, p.topic_data_params)
    def build() -> tuple:
        labelled = ctx.load_dataset(p.topic_data, p.topic_data_params)
        return tuple((bag_matrix(list(labelled[s].texts), setup.vocab), list(labelled[s].labels))
                     for s in ("train", "test"))

    return _BAGS.get_or_build(key, build)


def evaluate(ctx, setup: Setup, model: WordModel, p) -> dict[str, float]:
    """Every utility metric of ``model``: raw and calibrated perplexities (:mod:`dpkit_dped.scores`),
    word similarity, analogies, topic accuracy, cosine to the non-private model by quintile."""
    dev = ctx.device
    model = model.to(dev)
    out = model_scores(ctx, setup, p, model)
    for name in ("wordsim353", "simlex999"):
        rho, coverage = pair_spearman(model.vectors, setup.vocab, load_benchmark(ctx, name).pairs)
        out[f"{name}_spearman"], out[f"{name}_coverage"] = rho, coverage
    questions = all_analogy_questions(load_benchmark(ctx, "analogies"))
    out["analogy_accuracy"], out["analogy_questions"] = analogy_accuracy(model.vectors, setup.vocab,
                                                                         questions)
    if p.topic_data:
        train, test = topic_bags(ctx, setup, p)
        out["topic_accuracy"] = topic_accuracy(model.vectors, train, test,
                                               seed=ctx.numpy_seed("dped-topic"))
    reference = nonprivate_model(ctx, setup, p)
    for i, value in enumerate(quintile_similarity(model.vectors, reference.vectors,
                                                  setup.private_counts), start=1):
        out[f"quintile{i}_cos"] = value
    return out
