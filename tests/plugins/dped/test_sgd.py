"""DP-SGD's trainer in detail (dpkit_dped/sgd.py): the skip-gram's start and loss against a hand
computation, each step's released gradient against an independent per-document clipped sum, the
optimizer's update replayed from what the release returned, the curve's points and values, the
Opacus path, refusals with their reasons. Kills the mutants the noise and batch laws of
test_noise_laws.py cannot see (tools/mutation.toml)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from opacus import GradSampleModule
from opacus.accountants import RDPAccountant

from dpkit.audit.noise_law import gaussian_pvalue, simulated_power
from dpkit_dped.clipping import clip_factors
from dpkit_dped.sgd import (
    SkipGramNS,
    opacus_clipped_sum,
    train_dpsgd,
    train_dpsgd_documents,
    train_on_pairs,
)
from dpkit_dped.skipgram import WordModel

LEVEL = 1e-3
VOCAB, DIM, PAIRS, NEG = 9, 3, 4, 2


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def test_the_start_is_uniform_in_a_cube_of_side_one_over_dim_and_the_output_table_zero():
    dim = 8
    model = SkipGramNS(500, dim, torch.Generator().manual_seed(0))
    inp = model.inp.weight.detach().numpy().ravel()
    assert float(inp.min()) >= -0.5 / dim and float(inp.max()) < 0.5 / dim
    assert float(inp.min()) < -0.49 / dim and float(inp.max()) > 0.49 / dim
    assert not model.out.weight.any()
    assert len(model.inp.weight.unique(dim=0)) == 500, "rows are not drawn independently"
    again = SkipGramNS(500, dim, torch.Generator().manual_seed(0))
    assert torch.equal(again.inp.weight, model.inp.weight), "the start is not the generator's"


def test_document_loss_is_negative_sampling_summed_over_the_unmasked_pairs():
    """loss_b = Σ_p mask_bp · (−log σ(u₀·v) − Σ_k log σ(−u_k·v)), by hand in numpy."""
    g = torch.Generator().manual_seed(1)
    model = SkipGramNS(VOCAB, DIM, g)
    with torch.no_grad():
        model.inp.weight.normal_(generator=g)
        model.out.weight.normal_(generator=g)
    centers = torch.randint(0, VOCAB, (5, PAIRS), generator=g)
    targets = torch.randint(0, VOCAB, (5, PAIRS, 1 + NEG), generator=g)
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0]] * 4 + [[0.0] * PAIRS])
    inp, out = model.inp.weight.detach().numpy(), model.out.weight.detach().numpy()
    scores = np.einsum("bpkd,bpd->bpk", out[targets.numpy()], inp[centers.numpy()])
    pair = -_log_sigmoid(scores[..., 0]) - _log_sigmoid(-scores[..., 1:]).sum(-1)
    expected = (pair * mask.numpy()).sum(-1)
    got = model(centers, targets, mask).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert got[-1] == 0.0


def test_word_model_is_a_copy_of_the_input_and_output_tables():
    model = SkipGramNS(VOCAB, DIM, torch.Generator().manual_seed(2))
    with torch.no_grad():
        model.out.weight.fill_(0.25)
    words = model.word_model()
    assert torch.equal(words.vectors, model.inp.weight) and torch.equal(words.out_vectors,
                                                                        model.out.weight)
    before = words.vectors.clone(), words.out_vectors.clone()
    with torch.no_grad():
        model.inp.weight.add_(1.0)
        model.out.weight.add_(1.0)
    assert torch.equal(words.vectors, before[0]) and torch.equal(words.out_vectors, before[1])
    assert not words.vectors.requires_grad and not words.out_vectors.requires_grad


def _documents(n: int, seed: int):
    """n documents of PAIRS fixed (center, context) pairs, some pairs masked."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randint(1, VOCAB, (n, PAIRS), generator=g)
    contexts = torch.randint(1, VOCAB, (n, PAIRS), generator=g)
    mask = (torch.rand(n, PAIRS, generator=g) < 0.75).float()
    return centers, contexts, mask


def _start(seed: int) -> WordModel:
    g = torch.Generator().manual_seed(seed)
    return WordModel(torch.randn(VOCAB, DIM, generator=g), torch.randn(VOCAB, DIM, generator=g))


def _naive_clipped_sum(inp, out, centers, contexts, mask, max_norm):
    """Σ_b clip(∇ loss_b) on the dense tables, one autograd pass per document; the negatives are
    all word 0 (the trainer is given a one-hot negative distribution)."""
    params = [inp.clone().requires_grad_(True), out.clone().requires_grad_(True)]
    sums = [torch.zeros_like(inp), torch.zeros_like(out)]
    for b in range(len(centers)):
        targets = torch.cat([contexts[b:b + 1].unsqueeze(-1),
                             torch.zeros(1, PAIRS, NEG, dtype=torch.long)], -1)
        loss = SkipGramNS.document_losses(params[0][centers[b:b + 1]], params[1][targets],
                                          mask[b:b + 1]).sum()
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum(gr.pow(2).sum() for gr in grads))
        for s, gr in zip(sums, grads):
            s += gr * clip_factors(norm, max_norm)
    return sums


def _replay(start: WordModel, optimizer: str, n: int, rate: float, z: float, clip: float,
            steps: int, lr: float, seed: int, **momentum):
    """Train on fixed documents, recording each step's batch and what the release returned."""
    centers, contexts, mask = _documents(n, seed)
    batches, arrived = [], []

    def release(grads):
        arrived.append([g.clone() for g in grads])
        return grads

    neg = torch.zeros(VOCAB)
    neg[0] = 1.0
    trained = train_dpsgd(centers, contexts, mask, neg, dim=DIM, negatives=NEG,
                          noise_multiplier=z, max_grad_norm=clip, sampling_rate=rate, steps=steps,
                          lr=lr, generator=torch.Generator().manual_seed(seed), init=start,
                          optimizer=optimizer, release=release, **momentum,
                          on_batch=batches.append)
    return trained, batches, arrived, (centers, contexts, mask)


@pytest.mark.parametrize("z, clip", [(0.0, 0.3), (0.6, 0.3), (0.0, math.inf)])
def test_each_step_releases_the_clipped_sum_plus_z_c_noise_over_the_expected_batch(z, clip):
    """The released gradient times B = round(q·n) minus the per-document clipped sum of the
    sampled documents (recomputed here at the replayed parameters) is N(0, (zC)²) per coordinate
    (exactly 0 at z = 0, also for the non-private recipe's C = ∞); SGD with the default momentum
    0.9 applies what the release returned."""
    n, rate, steps, lr, momentum = 40, 0.25, 6, 0.5, 0.9
    start = _start(3)
    trained, batches, arrived, (centers, contexts, mask) = _replay(
        start, "sgd", n, rate, z, clip, steps, lr, seed=4)
    expected = round(rate * n)
    assert len(batches) == len(arrived) == steps and {len(b) for b in batches} != {expected}
    params, velocity, noise = [start.vectors.clone(), start.out_vectors.clone()], None, []
    for batch, grads in zip(batches, arrived):
        clipped = _naive_clipped_sum(*params, centers[batch], contexts[batch], mask[batch], clip)
        noise += [(g * expected - c).reshape(-1) for g, c in zip(grads, clipped)]
        velocity = grads if velocity is None else [momentum * v + g for v, g in zip(velocity, grads)]
        params = [p - lr * v for p, v in zip(params, velocity)]
    noise = torch.cat(noise).double().numpy()
    if z == 0:
        assert np.abs(noise).max() < 1e-5
    else:
        sigma = z * clip
        power = min(simulated_power(lambda x: gaussian_pvalue(x, sigma),
                                    lambda rng, f=f: rng.normal(0, sigma * f, noise.size), LEVEL, 200)
                    for f in (1.5, 1 / 1.5))
        assert power >= 0.95, power
        assert gaussian_pvalue(noise, sigma) >= LEVEL, (float(noise.std()), sigma)
    assert torch.allclose(trained.vectors, params[0], atol=1e-5)
    assert torch.allclose(trained.out_vectors, params[1], atol=1e-5)


def test_a_batch_expected_below_one_document_divides_by_one():
    """q·n = 0.2 rounds to 0: the noise is divided by 1, not 0 (nor 2). The documents have no
    unmasked pair, so each released gradient is its noise."""
    n, rate, z, clip = 10, 0.02, 1.0, 0.5
    arrived = []
    centers = torch.ones(n, PAIRS, dtype=torch.long)
    train_dpsgd(centers, centers, torch.zeros(n, PAIRS), torch.full((VOCAB,), 1 / VOCAB),
                dim=DIM, negatives=NEG, noise_multiplier=z, max_grad_norm=clip,
                sampling_rate=rate, steps=40, lr=0.1, generator=torch.Generator().manual_seed(6),
                release=lambda grads: arrived.append(grads) or grads)
    noise = torch.cat([g.reshape(-1) for step in arrived for g in step]).double().numpy()
    assert gaussian_pvalue(noise, z * clip) >= LEVEL, float(noise.std())
    assert gaussian_pvalue(noise, z * clip / 2) < LEVEL


def test_adam_moves_every_noisy_coordinate_by_about_the_learning_rate():
    """Adam's first step is lr·g/(|g| + ε): with noise on every coordinate each moves by ≈ lr."""
    start = _start(7)
    trained, _, arrived, _ = _replay(start, "adam", 20, 0.3, 1.0, 0.5, 1, 0.01, seed=8)
    for before, after, grad in zip((start.vectors, start.out_vectors),
                                   (trained.vectors, trained.out_vectors), arrived[0]):
        step = before - after
        assert torch.allclose(step, 0.01 * grad.sign(), rtol=1e-3, atol=1e-6)


def test_what_the_release_returns_is_what_is_applied():
    start = _start(9)
    centers, contexts, mask = _documents(30, 10)
    trained = train_dpsgd(centers, contexts, mask, torch.full((VOCAB,), 1 / VOCAB), dim=DIM,
                          negatives=NEG, noise_multiplier=1.0, max_grad_norm=1.0,
                          sampling_rate=0.5, steps=3, lr=1.0, init=start,
                          generator=torch.Generator().manual_seed(11),
                          release=lambda grads: [torch.zeros_like(g) for g in grads])
    assert torch.equal(trained.vectors, start.vectors)
    assert torch.equal(trained.out_vectors, start.out_vectors)


def test_the_curve_records_the_mean_loss_per_pair_and_the_validation_log_perplexity():
    """lr = 0 keeps the random start with its zero output table: every score is 0, so every pair
    costs (1 + K)·log 2 and the model predicts the uniform distribution (log perplexity log V)."""
    centers, contexts, mask = _documents(30, 12)
    validation = (torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6]))
    trained = train_dpsgd(centers, contexts, mask, torch.full((VOCAB,), 1 / VOCAB), dim=DIM,
                          negatives=NEG, noise_multiplier=0.0, max_grad_norm=1.0,
                          sampling_rate=0.3, steps=10, lr=0.0,
                          generator=torch.Generator().manual_seed(13), validation=validation,
                          curve_points=3)
    curve = trained.curve
    assert (curve.component, curve.unit) == ("DP-SGD skip-gram", "step")
    assert curve.steps == [3, 6, 9, 10]
    assert curve.train_loss == pytest.approx([(1 + NEG) * math.log(2)] * 4, rel=1e-5)
    assert curve.val_loss == pytest.approx([math.log(VOCAB)] * 4, rel=1e-5)
    default = train_dpsgd(centers, contexts, mask, torch.full((VOCAB,), 1 / VOCAB), dim=DIM,
                          negatives=NEG, noise_multiplier=0.0, max_grad_norm=1.0,
                          sampling_rate=0.3, steps=40, lr=0.0,
                          generator=torch.Generator().manual_seed(13))
    assert default.curve.steps == list(range(2, 41, 2))  # 20 points: every 40 // 20 steps
    assert all(math.isnan(v) for v in default.curve.val_loss)


def test_an_interval_with_one_pair_averages_over_that_pair():
    """One document of one pair, sampled at every step: each point is that pair's loss."""
    one = torch.tensor([[1]]), torch.tensor([[2]]), torch.ones(1, 1)
    trained = train_dpsgd(*one, torch.full((VOCAB,), 1 / VOCAB), dim=DIM, negatives=NEG,
                          noise_multiplier=0.0, max_grad_norm=1.0, sampling_rate=1.0, steps=3,
                          lr=0.0, generator=torch.Generator().manual_seed(14), curve_points=3)
    assert trained.curve.steps == [1, 2, 3]
    assert trained.curve.train_loss == pytest.approx([(1 + NEG) * math.log(2)] * 3, rel=1e-5)
    empty = train_dpsgd(*one, torch.full((VOCAB,), 1 / VOCAB), dim=DIM, negatives=NEG,
                        noise_multiplier=0.0, max_grad_norm=1.0, sampling_rate=0.0, steps=2,
                        lr=0.0, generator=torch.Generator().manual_seed(14), curve_points=2)
    assert empty.curve.train_loss == [0.0, 0.0]


@pytest.mark.parametrize("clip", [0.2, 50.0])  # every document clipped; none
def test_opacus_clipping_trains_the_same_model_and_its_accountant_is_stepped(clip):
    start = _start(15)
    centers, contexts, mask = _documents(30, 16)
    models, accountants = [], []
    for clipping in ("sparse", "opacus"):
        accountants.append(RDPAccountant())
        models.append(train_dpsgd(centers, contexts, mask, torch.full((VOCAB,), 1 / VOCAB),
                                  dim=DIM, negatives=NEG, noise_multiplier=0.8, max_grad_norm=clip,
                                  sampling_rate=0.4, steps=4, lr=0.5, init=start,
                                  generator=torch.Generator().manual_seed(17), clipping=clipping,
                                  opacus_accountant=accountants[-1]))
    sparse, opacus = models
    assert torch.allclose(sparse.vectors, opacus.vectors, atol=1e-5)
    assert torch.allclose(sparse.out_vectors, opacus.out_vectors, atol=1e-5)
    assert not torch.allclose(sparse.vectors, start.vectors, atol=1e-3)
    assert accountants[0].history == [(0.8, 0.4, 4)]


@pytest.mark.parametrize("bad, message", [
    ({"optimizer": "rmsprop"}, "optimizer must be 'sgd' or 'adam', got 'rmsprop'"),
    ({"clipping": "dense"}, "clipping must be 'sparse' or 'opacus', got 'dense'"),
])
def test_an_unknown_optimizer_or_clipping_is_refused(bad, message):
    centers, contexts, mask = _documents(4, 18)
    with pytest.raises(ValueError, match=f"^{message}$"):
        train_dpsgd(centers, contexts, mask, torch.full((VOCAB,), 1 / VOCAB), dim=DIM,
                    negatives=NEG, noise_multiplier=1.0, max_grad_norm=1.0, sampling_rate=0.5,
                    steps=1, lr=0.1, generator=torch.Generator().manual_seed(0), **bad)


def test_every_draw_comes_from_the_given_generator():
    """Sampling, pairs, negatives, noise and the start: equal seeds give the same model whatever
    the global RNG holds."""
    g = torch.Generator().manual_seed(19)
    tokens = torch.randint(0, VOCAB, (25, 7), generator=g)
    lengths = torch.randint(1, 8, (25,), generator=g)
    models = []
    with torch.random.fork_rng():
        for global_seed in (0, 1):
            torch.manual_seed(global_seed)
            models.append(train_dpsgd_documents(
                tokens, lengths, torch.full((VOCAB,), 1 / VOCAB), pairs_per_doc=3, window=2,
                dim=DIM, negatives=NEG, noise_multiplier=0.5, max_grad_norm=1.0,
                sampling_rate=0.3, steps=3, lr=0.5, generator=torch.Generator().manual_seed(20)))
    assert torch.equal(models[0].vectors, models[1].vectors)
    assert torch.equal(models[0].out_vectors, models[1].out_vectors)


def test_a_rate_of_zero_samples_no_document_and_a_rate_of_one_every_document():
    """A document is in the batch with probability exactly q: at q = 0 also when the uniform draw
    is exactly 0 (2**26 documents: after the model's start, this generator draws exact zeros)."""
    n, g = 2 ** 26, torch.Generator().manual_seed(21)
    torch.rand(VOCAB, DIM, generator=g)
    assert int((torch.rand(n, generator=g) == 0).sum()) > 0
    sizes = []
    one = torch.tensor([[1]]), torch.tensor([[2]]), torch.ones(1, 1)
    for rate, docs in ((0.0, n), (1.0, 50)):
        train_on_pairs(docs, lambda batch, generator: tuple(t[:0] for t in one) if not len(batch)
                       else tuple(t.expand(len(batch), 1) for t in one),
                       torch.full((VOCAB,), 1 / VOCAB), dim=DIM, negatives=NEG,
                       noise_multiplier=0.0, max_grad_norm=1.0, sampling_rate=rate, steps=1,
                       lr=0.1, generator=torch.Generator().manual_seed(21),
                       on_batch=lambda batch: sizes.append(len(batch)))
    assert sizes == [0, 50]


class _LoudModule(GradSampleModule):
    """Opacus' module, warning once as Opacus does (UserWarning) and once numerically."""

    def forward(self, *args, **kwargs):
        warnings.warn("hooks on embeddings whose inputs need no grad", UserWarning, stacklevel=2)
        warnings.warn("overflow in the loss", RuntimeWarning, stacklevel=2)
        return super().forward(*args, **kwargs)


def test_opacus_clipping_silences_only_its_user_warnings():
    g = torch.Generator().manual_seed(22)
    model = SkipGramNS(VOCAB, DIM, g)
    centers, contexts, mask = _documents(3, 23)
    targets = torch.cat([contexts.unsqueeze(-1), torch.zeros(3, PAIRS, NEG, dtype=torch.long)], -1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opacus_clipped_sum(_LoudModule(model, loss_reduction="sum"), centers, targets, mask, 1.0)
    assert [w.category for w in caught] == [RuntimeWarning]
