"""Per-sample clipping of DP-SGD: sparse rows vs Opacus' per-sample gradients vs a naive loop."""

from __future__ import annotations

import pytest
import torch
from dpkit_dped.clipping import clip_factors
from dpkit_dped.dpsgd import (
    SkipGramNS,
    opacus_clipped_sum,
    sparse_clipped_sum,
    train_dpsgd_documents,
)
from opacus import GradSampleModule

VOCAB, DIM, PAIRS, NEG = 12, 5, 6, 3


def tiny_batch(seed: int = 0):
    """A model with non-zero output vectors and documents that repeat ids (duplicates must be
    summed before the per-sample norm) and mask some pairs."""
    gen = torch.Generator().manual_seed(seed)
    model = SkipGramNS(VOCAB, DIM, gen)
    with torch.no_grad():
        model.inp.weight.normal_(generator=gen)
        model.out.weight.normal_(generator=gen)
    centers = torch.randint(0, 4, (7, PAIRS), generator=gen)  # ids 0–3: many repeats per document
    targets = torch.randint(0, 6, (7, PAIRS, 1 + NEG), generator=gen)
    mask = (torch.rand(7, PAIRS, generator=gen) < 0.8).float()
    return model, centers, targets, mask


def naive_clipped_sum(model, centers, targets, mask, max_norm):
    """One backward pass per document on the dense tables; clip the full gradient; sum."""
    params = [model.inp.weight, model.out.weight]
    sums, norms = [torch.zeros_like(p) for p in params], []
    for b in range(len(centers)):
        loss = model(centers[b:b + 1], targets[b:b + 1], mask[b:b + 1]).sum()
        grads = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        norms.append(norm)
        for s, g in zip(sums, grads):
            s += g * clip_factors(norm, max_norm)
    return sums, torch.stack(norms)


@pytest.mark.parametrize("max_norm", [0.05, 1.0, 100.0])  # all, some and no documents clipped
def test_sparse_clipping_equals_naive_loop_and_opacus(max_norm):
    model, centers, targets, mask = tiny_batch()
    naive, naive_norms = naive_clipped_sum(model, centers, targets, mask, max_norm)
    sparse, sparse_norms, _ = sparse_clipped_sum(model, centers, targets, mask, max_norm)
    module = GradSampleModule(model, loss_reduction="sum")
    opacus, opacus_norms, _ = opacus_clipped_sum(module, centers, targets, mask, max_norm)
    torch.testing.assert_close(sparse_norms, naive_norms, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(opacus_norms, naive_norms, rtol=1e-5, atol=1e-6)
    for s, o, r in zip(sparse, opacus, naive):
        torch.testing.assert_close(s, r, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-6)
    clipped_norms = torch.sqrt(sum(s.pow(2).sum() for s in sparse))
    assert float(clipped_norms) <= len(centers) * max_norm + 1e-5
    if max_norm == 0.05:
        assert bool((naive_norms > max_norm).all())  # the bound really binds in this case


def test_per_position_norms_would_be_caught():
    """Norms taken per gathered row instead of per document (repeats not summed) differ here."""
    model, centers, targets, mask = tiny_batch()
    _, norms, _ = sparse_clipped_sum(model, centers, targets, mask, 1.0)
    rows = [t.detach()[i].requires_grad_(True) for t, i in
            zip([model.inp.weight, model.out.weight], [centers, targets])]
    grads = torch.autograd.grad(SkipGramNS.document_losses(*rows, mask).sum(), rows)
    unsummed = torch.sqrt(sum(g.pow(2).flatten(1).sum(1) for g in grads))
    assert not torch.allclose(unsummed, norms, rtol=1e-3)


def test_noise_std_on_every_coordinate_is_z_c_over_expected_batch(monkeypatch):
    """With a zero learning signal (one-word documents: every pair masked) a step is pure noise."""
    n, z, clip, q = 400, 2.0, 0.5, 0.05
    captured = []

    class Spy(torch.optim.SGD):
        def step(self, closure=None):
            captured.append([p.grad.clone() for group in self.param_groups for p in group["params"]])

    monkeypatch.setattr(torch.optim, "SGD", Spy)
    train_dpsgd_documents(torch.zeros(n, 3, dtype=torch.long), torch.ones(n, dtype=torch.long),
                torch.full((200,), 1 / 200), pairs_per_doc=3, window=2, dim=50, negatives=2,
                noise_multiplier=z, max_grad_norm=clip, sampling_rate=q, steps=1, lr=0.1,
                generator=torch.Generator().manual_seed(0))
    expected = z * clip / round(q * n)
    for grad in captured[0]:
        assert grad.shape == (200, 50)
        assert float(grad.std()) == pytest.approx(expected, rel=0.03)
        assert float(grad.mean()) == pytest.approx(0.0, abs=4 * expected / 100)
