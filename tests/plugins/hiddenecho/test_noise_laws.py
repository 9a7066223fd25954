"""HiddenEcho's client noise (``privatize_split``): each token's upload is its clean embedding plus
noise of the declared Laplace law (power against a 1.5× scale error by simulation), drawn once
per token, independently across calls and streams."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from dpkit.audit.independence import dependence
from dpkit.testing.noise_contract import assert_laplace_law
from dpkit.testing.params_contract import build_component
from dpkit_hiddenecho.data import privatize_split



def _model(dim: int = 4):
    table = torch.randn(30, dim, generator=torch.Generator().manual_seed(0)) * 2
    return SimpleNamespace(device=torch.device("cpu"), embed=lambda ids: table[ids]), table


def _texts(n: int = 120):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(30, (int(k),), generator=g) for k in torch.randint(3, 12, (n,), generator=g)]


def _noise(mech, model, ids, seed):
    split = privatize_split(model, ids, [0] * len(ids), mech, None,
                            torch.Generator().manual_seed(seed))
    assert [len(t) for t in split.noisy] == [len(t) for t in ids]
    assert split.n_tokens == sum(len(t) for t in ids)
    return torch.cat(split.noisy).double() - model.embed(torch.cat(ids)).double()


def test_uploads_are_clean_embeddings_plus_declared_laplace_noise():
    model, _ = _model()
    eta = 4.0
    mech = build_component("mechanism", "laplace_dx", {"eta": eta})
    noise = _noise(mech, model, _texts(), 0)
    assert_laplace_law(noise, eta)  # asserts its power against a 1.5× scale error first



@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cuda_models_uploads_and_labels_stay_on_its_device_with_the_declared_law():
    """A split of a CUDA model is trained on the GPU: its labels live there with its noisy rows,
    clean embeddings plus the declared Laplace noise of the cell's CUDA generator."""
    _, table = _model()
    on_cuda, eta = table.cuda(), 4.0
    model = SimpleNamespace(device=torch.device("cuda"), embed=lambda ids: on_cuda[ids.to("cuda")])
    ids = _texts()
    labels = [i % 3 for i in range(len(ids))]
    mech = build_component("mechanism", "laplace_dx", {"eta": eta})
    split = privatize_split(model, ids, labels, mech, None, torch.Generator(device="cuda").manual_seed(0))
    assert split.labels.device.type == "cuda" and split.labels.tolist() == labels
    assert {t.device.type for t in split.noisy} == {"cuda"}
    assert_laplace_law(torch.cat(split.noisy).double().cpu() - table[torch.cat(ids)].double(), eta)

def test_two_calls_and_two_streams_draw_independent_noise():
    """The train and test splits (two streams) and two calls on one stream share no noise."""
    model, _ = _model()
    mech = build_component("mechanism", "laplace_dx", {"eta": 4.0})
    ids = _texts()
    for a, b in ((_noise(mech, model, ids, 5), _noise(mech, model, ids, 6)),):
        p, repeats = dependence(a, b)
        assert repeats == 0 and p >= 1e-4, (p, repeats)
    gen = torch.Generator().manual_seed(7)
    first = privatize_split(model, ids, [0] * len(ids), mech, None, gen)
    second = privatize_split(model, ids, [0] * len(ids), mech, None, gen)
    clean = model.embed(torch.cat(ids))
    p, repeats = dependence(torch.cat(first.noisy) - clean, torch.cat(second.noisy) - clean)
    assert repeats == 0 and p >= 1e-4, (p, repeats)


def test_privatize_split_hands_the_space_and_generator_and_keeps_dtypes_and_labels():
    model, table = _model()
    seen = {}

    class Recording:
        def privatize(self, x, *, space, generator):
            seen["space"], seen["generator"] = space, generator
            return x.double() + 1.0

    ids = _texts(5)
    space, gen = object(), torch.Generator().manual_seed(1)
    split = privatize_split(model, ids, [1, 0, 2, 1, 0], Recording(), space, gen)
    assert seen == {"space": space, "generator": gen}
    assert all(n.dtype == table.dtype for n in split.noisy)
    assert torch.equal(torch.cat(split.noisy), table[torch.cat(ids)] + 1.0)
    assert torch.equal(split.labels, torch.tensor([1, 0, 2, 1, 0])) and split.labels.dtype == torch.long
    assert len(split) == 5


def test_no_texts_release_nothing_and_the_noise_is_the_generators():
    model, _ = _model()
    mech = build_component("mechanism", "laplace_dx", {"eta": 4.0})
    empty = privatize_split(model, [], [], mech, None, torch.Generator().manual_seed(0))
    assert empty.n_tokens == 0 and len(empty) == 0 and empty.labels.shape == (0,)
    ids = _texts(10)
    first = _noise(mech, model, ids, 3)
    torch.manual_seed(99)  # the global stream must not matter
    assert torch.equal(first, _noise(mech, model, ids, 3))
