"""Gated residual denoiser (Eq. 2–3, 6): gates route information as the equations say."""

import torch
from dpkit_hiddenecho.denoiser import (
    GatedResidualDenoiser,
    TaskHead,
    last_token,
    masked_mean,
)


def make(residual=True, gate=0.0, layers=2, width=8):
    torch.manual_seed(0)
    net = GatedResidualDenoiser(layers, width, 12, heads=2, dropout=0.0, residual=residual)
    with torch.no_grad():
        net.gates.fill_(gate)
    return net.eval()


def inputs(layers=2, width=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    e = torch.randn(3, 5, width, generator=g)
    hidden = [torch.randn(3, 5, width, generator=g) for _ in range(layers)]
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0, 3:] = False
    return e, hidden, mask


def test_mix_is_the_sigmoid_gate_of_eq2():
    net = make(gate=0.7)
    a, h = torch.randn(2, 8), torch.randn(2, 8)
    mu = torch.sigmoid(torch.tensor(0.7))
    assert torch.allclose(net.mix(0, a, h), mu * a + (1 - mu) * h)


def test_closed_gates_ignore_the_server_states():
    net = make(gate=30.0)
    e, hidden, mask = inputs()
    other = [h + 5.0 for h in hidden]
    assert torch.allclose(net(e, hidden, mask), net(e, other, mask), atol=1e-5)


def test_open_gates_without_residual_ignore_the_clean_embedding():
    net = make(residual=False, gate=-30.0)
    e, hidden, mask = inputs()
    assert torch.allclose(net(e, hidden, mask), net(e + 5.0, hidden, mask), atol=1e-5)


def test_residual_carries_the_clean_embedding_past_open_gates():
    net = make(residual=True, gate=-30.0)
    e, hidden, mask = inputs()
    assert not torch.allclose(net(e, hidden, mask), net(e + 5.0, hidden, mask), atol=1e-3)


def test_output_is_upsampled_and_gates_get_gradients():
    net = make(gate=0.0).train()
    e, hidden, mask = inputs()
    out = net(e, hidden, mask)
    assert out.shape == (3, 5, 12)
    out.sum().backward()
    assert net.gates.grad is not None and net.gates.grad.abs().sum() > 0


def test_poolings_respect_the_mask():
    x = torch.arange(12.0).view(1, 4, 3)
    mask = torch.tensor([[True, True, False, False]])
    assert torch.allclose(masked_mean(x, mask), x[0, :2].mean(0, keepdim=True))
    assert torch.allclose(last_token(x, mask), x[0, 1:2])
    assert TaskHead(3, 2)(x, mask).shape == (1, 2)
