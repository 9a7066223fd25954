"""Early stopping of DPED's students and teachers: on free or own-shard data, never the private split."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dpkit_dped.corpus import build_vocabulary, encode, sentences, skipgram_pairs
from dpkit_dped.defenses import DpedDefense
from dpkit_dped.skipgram import WordModel, train_gensim
from dpkit_dped.selection import row_output_losses
from dpkit_dped.student import split_holdout, train_student
from pydantic import ValidationError


from .conftest import TEACHER, make_texts, teachers_changed_by_one_document

V, D = 20, 8


def answers(seed: int = 0, n: int = 40):
    """Random released answers: query ids, noisy hidden vectors, vote labels."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randperm(V, generator=g).repeat(2)[:n]
    return ids, torch.randn(n, D, generator=g), torch.randint(0, V, (n,), generator=g)


def student(*, labels=None, init=None, patience=2, lr=0.05, with_hidden=True, n=40):
    ids, hidden, drawn = answers(n=n)
    return train_student(ids, hidden if with_hidden else None, drawn if labels is None else labels,
                         vocab_size=V, dim=D,
                         epochs=30, lr=lr, batch_size=8, hidden_weight=1.0, loss_kind="squared",
                         generator=torch.Generator().manual_seed(1), init=init,
                         patience=patience, holdout_share=0.25)


def test_the_student_reads_only_what_was_released():
    """The student runs on the untrusted side: nothing private may reach it, not even a
    diagnostic. Its function takes no corpus, context or validation split, and its module imports
    nothing that loads data."""
    import ast
    import inspect

    import dpkit_dped.student as module

    names = set(inspect.signature(train_student).parameters)
    assert not names & {"validation", "ctx", "setup", "texts", "corpus", "dataset"}, names
    tree = ast.parse(inspect.getsource(module))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m and m.split(".")[-1] in
                {"pipeline", "corpus", "sources", "scores", "calibration", "evaluation", "data"}}


@pytest.mark.parametrize("finish", ["fold_in", "rerun"])
def test_a_kept_epoch_is_finished_on_every_answer(finish):
    """After the selection run the held-out words' vectors move too (fold-in with the kept output
    layer, or a rerun on every answer), which the selection run itself never trains."""
    words, g = 60, torch.Generator().manual_seed(2)
    start = WordModel(torch.randn(words, D, generator=g), torch.randn(words, D, generator=g),
                      torch.zeros(words))
    ids = torch.randperm(words, generator=g)  # every word answered once
    labels = ids % 3  # a learnable rule: every word predicts one of three contexts
    soft = torch.nn.functional.one_hot(labels, words).float() * 0.9 + 0.1 / words

    def run(how: str) -> WordModel:
        return train_student(ids, None, soft, vocab_size=words, dim=D, epochs=30, lr=0.1,
                             batch_size=8, hidden_weight=0.0, loss_kind="cross_entropy",
                             generator=torch.Generator().manual_seed(1), init=start, patience=3,
                             holdout_share=0.25, fold_targets=soft, finish=how)

    kept, finished = run("none"), run(finish)
    assert kept.selection.significant and kept.curve.best_step > 0
    assert finished.curve.best_step == kept.curve.best_step
    _, held = split_holdout(torch.arange(words), 0.25, torch.Generator().manual_seed(1))
    held_words = ids[held]
    assert torch.equal(kept.vectors[held_words], start.vectors[held_words])
    assert not torch.equal(finished.vectors[held_words], start.vectors[held_words])
    truth = row_output_losses(finished.context_logits(ids), soft, "cross_entropy").mean()
    assert truth < row_output_losses(kept.context_logits(ids), soft, "cross_entropy").mean()
    assert finished.selection.finish and kept.selection.finish is None
    with pytest.raises(ValueError, match="finish"):
        run("twice")


def test_a_student_that_only_gets_worse_keeps_its_start():
    ids, _, _ = answers()
    vectors = torch.eye(V, D) * 5
    out = torch.zeros(V, D)
    out[:D] = torch.eye(D) * 5  # word i (< D) predicts context i with a wide margin
    start = WordModel(vectors, out, torch.zeros(V))
    # the student's own split (same generator): held-out labels are what the start predicts,
    # the trained ones contradict it
    fit, held = split_holdout(torch.arange(len(ids)), 0.25, torch.Generator().manual_seed(1))
    labels = torch.where(ids < D, ids, torch.zeros_like(ids))
    labels[fit] = (labels[fit] + 1) % D
    model = student(labels=labels, init=start, lr=0.5, with_hidden=False)
    held_loss = model.curve.val_loss
    assert model.curve.best_step == 0 and held_loss[0] < min(held_loss[1:])
    assert model.curve.stopped_early
    assert torch.equal(model.vectors, vectors) and torch.equal(model.out_vectors, out)


def test_students_without_patience_train_every_epoch():
    model = student(patience=None)
    assert model.curve.steps == list(range(1, 31)) and model.curve.stopped_early is None


def test_stopping_params_are_validated():
    with pytest.raises(ValidationError):
        DpedDefense.Params.model_validate({**TEACHER, "student_patience": 0})
    with pytest.raises(ValidationError):
        DpedDefense.Params.model_validate({**TEACHER, "teacher_holdout_share": 1.0})
    with pytest.raises(ValueError, match="holdout"):
        train_gensim([["a", "b", "a"]], build_vocabulary(["a b"], 5, 1), dim=4, window=1,
                     epochs=2, negative=1, seed=0, patience=1, holdout=None)


def test_skipgram_stops_on_its_holdout_and_ignores_the_diagnostic_split():
    texts, _ = make_texts(60, seed=4)
    vocab = build_vocabulary(texts, 30, 1)
    sents, rng = sentences(texts[:50], vocab), np.random.default_rng(0)
    holdout = skipgram_pairs(encode(texts[50:], vocab), 2, 400, rng)
    diag = skipgram_pairs(encode(make_texts(10, seed=9)[0], vocab), 2, 400, rng)
    kw = dict(dim=8, window=2, epochs=8, negative=3, seed=0, patience=2, holdout=holdout)
    a = train_gensim(sents, vocab, validation=diag, **kw)
    b = train_gensim(sents, vocab, validation=None, **kw)
    assert torch.equal(a.vectors, b.vectors) and torch.equal(a.out_vectors, b.out_vectors)
    best = a.curve.best_step
    assert best == 1 + int(np.argmin(a.curve.val_loss)) and a.curve.stopped_early is not None
    assert len(a.curve.val_metric) == len(a.curve.steps) and not b.curve.val_metric


def test_stopping_teachers_still_change_one_teacher_per_document(make_ctx):
    p = DpedDefense.Params.model_validate({**TEACHER, "epochs": 4, "teacher_patience": 1,
                                           "teacher_holdout_share": 0.2})
    same, teachers = teachers_changed_by_one_document(make_ctx, p, n_train=160)
    assert same.count(False) == 1, same
    assert all(t.curve.best_step is not None for t in teachers)


def test_uninformative_terms_train_nothing_and_hidden_only_words_take_their_target():
    g = torch.Generator().manual_seed(3)
    start = WordModel(torch.randn(V, D, generator=g), torch.randn(V, D, generator=g), torch.zeros(V))
    ids = torch.tensor([0, 1, 2, 2])
    hidden = torch.randn(4, D, generator=g)
    model = train_student(ids, hidden, torch.zeros(4, dtype=torch.long), vocab_size=V, dim=D,
                          epochs=5, lr=0.1, batch_size=2, hidden_weight=1.0, loss_kind="squared",
                          generator=g, init=start, patience=2,
                          output_rows=torch.zeros(4, dtype=torch.bool),
                          hidden_rows=torch.tensor([True, False, True, True]))
    torch.testing.assert_close(model.vectors[0], hidden[0])
    torch.testing.assert_close(model.vectors[2], hidden[2:].mean(0))  # the minimiser of both terms
    untouched = [i for i in range(V) if i not in (0, 2)]
    assert torch.equal(model.vectors[untouched], start.vectors[untouched])
    assert torch.equal(model.out_vectors, start.out_vectors)
    assert model.curve.solver_converged and model.curve.steps == [0]
