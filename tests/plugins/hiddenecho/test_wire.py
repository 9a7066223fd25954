"""HiddenEcho on dpkit's wire: bytes counted equal the sizes of the tensors that crossed, each way."""

import pytest
import torch
from dpkit_hiddenecho.protocol import Layout, SplitProtocol
from dpkit_hiddenecho.server import attach_lora

from dpkit.accounting import Ledger
from dpkit.models import tiny_encoder
from dpkit.wire import DOWN, UP, Wire, tensor_bytes


def batch(model, b=4):
    ids, mask = model.tokenize(["the movie was good", "bad plot", "a great actor and a story",
                                "i hate it"][:b])
    clean = model.embed(ids).detach()
    return clean + 0.1 * torch.randn_like(clean), clean, mask.bool(), torch.tensor([1, 0, 1, 0][:b])


@pytest.mark.parametrize("layers,width,on_server,denoise", [
    ((0, 2), 8, True, True),      # HiddenEcho: two layers reduced on the server
    ((0, 1, 2), 8, False, True),  # Full: every layer at full width
    ((2,), 32, False, False),     # LDP: the last layer only
])
def test_protocol_bytes_equal_tensor_sizes(layers, width, on_server, denoise):
    torch.manual_seed(0)
    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 4, 8.0, 0.0, None)
    wire = Wire(Ledger())
    layout = Layout(layers=layers, width=width, reduce_on_server=on_server, denoise=denoise,
                    heads=2, ib_alpha=0.1 if on_server else 0.0, mine_tokens=16)
    wire.phase = "train"
    proto = SplitProtocol(model, layout, 2, "mean", wire, torch.Generator().manual_seed(0))
    noisy, clean, mask, labels = batch(model)
    proto.step(noisy, clean, mask, labels)
    b, n, d = noisy.shape
    sent_width = width if on_server else d
    hidden = len(layers) * b * n * sent_width * 4
    assert wire.bytes("train", UP, "embeddings") == tensor_bytes(noisy) == b * n * d * 4
    assert wire.bytes("train", UP, "mask") == b * n
    assert wire.bytes("train", DOWN, "hidden_states") == hidden
    assert wire.bytes("train", UP, "gradients") == hidden
    lora = [p for name, p in model.server.named_parameters() if "lora_B" in name]
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lora)
    proto.train(False)
    wire.phase = "eval"
    probs = proto.predict(noisy, clean, mask)
    assert torch.allclose(probs.sum(-1), torch.ones(b))
    assert wire.bytes("eval") == b * n * d * 4 + b * n + hidden


def test_lora_on_top_layers_only():
    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 2, 4.0, 0.0, None, top_layers=1)
    names = [n for n, p in model.server.named_parameters() if p.requires_grad]
    assert names and all("layer.2." in n and "lora_" in n for n in names)


def test_gradients_go_up_only_for_states_with_trainable_server_parts():
    torch.manual_seed(0)
    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 2, 4.0, 0.0, None, top_layers=1)
    wire = Wire(Ledger())
    layout = Layout(layers=(0, 1, 2), width=8, reduce_on_server=False, heads=2)
    wire.phase = "train"
    proto = SplitProtocol(model, layout, 2, "mean", wire, torch.Generator().manual_seed(0))
    noisy, clean, mask, labels = batch(model)
    proto.step(noisy, clean, mask, labels)
    b, n, d = noisy.shape
    assert wire.bytes("train", DOWN, "hidden_states") == 3 * b * n * d * 4
    assert wire.bytes("train", UP, "gradients") == 1 * b * n * d * 4
