"""HiddenEcho on dpkit's wire: bytes counted equal the sizes of the tensors that crossed, each way."""

import pytest
import torch
from dpkit_hiddenecho.protocol import Layout, SplitProtocol
from dpkit_hiddenecho.server import attach_lora

from dpkit.accounting import Ledger
from dpkit.models import tiny_encoder
from dpkit.release.wire import DOWN, UP, Wire, tensor_bytes


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


def spy_on_sends(wire):
    """Record (phase, name, direction, dtype) of every tensor ``wire`` sends or replies."""
    sent, send, reply = [], wire.send, wire.reply

    def spy_up(name, tensor, *args, **kwargs):
        sent.append((wire.phase, name, UP, tensor.dtype))
        return send(name, tensor, *args, **kwargs)

    def spy_down(name, tensor, **kwargs):
        sent.append((wire.phase, name, DOWN, tensor.dtype))
        return reply(name, tensor, **kwargs)

    wire.send, wire.reply = spy_up, spy_down
    return sent


def linear_output_dtypes(modules):
    """The output dtypes of every ``nn.Linear`` under ``modules``, as they run."""
    seen = set()
    for module in modules:
        for m in module.modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
    return seen


def bf16_last_block(model):
    """Make the last block return bfloat16 states under autocast, as some bodies do (BERT's and
    Llama's end in an fp32 norm or residual, so theirs are fp32 anyway)."""
    from dpkit_hiddenecho.server import transformer_blocks

    def cast(_module, _inputs, output):
        if not torch.is_autocast_enabled("cpu"):
            return output
        if isinstance(output, tuple):
            return (output[0].to(torch.bfloat16), *output[1:])
        return output.to(torch.bfloat16)

    transformer_blocks(model.server, model.num_layers)[-1].register_forward_hook(cast)


def split_run(precision, layers, width, on_server, denoise, bf16_states=False):
    """One training step and one inference batch at ``precision``: (loss, probabilities, bytes
    by (phase, direction, name), sends, output dtypes of the server body's / the rest's
    linear layers)."""
    torch.manual_seed(0)
    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 4, 8.0, 0.0, None)
    if bf16_states:
        bf16_last_block(model)
    wire = Wire(Ledger())
    layout = Layout(layers=layers, width=width, reduce_on_server=on_server, denoise=denoise,
                    heads=2, ib_alpha=0.1 if on_server else 0.0, mine_tokens=16)
    proto = SplitProtocol(model, layout, 2, "mean", wire, torch.Generator().manual_seed(0),
                          precision=precision)
    body = linear_output_dtypes([model.server])
    rest = linear_output_dtypes([proto.client, proto.server])
    sent = spy_on_sends(wire)
    noisy, clean, mask, labels = batch(model)
    wire.phase = "train"
    loss = proto.step(noisy, clean, mask, labels)
    proto.train(False)
    wire.phase = "eval"
    probs = proto.predict(noisy, clean, mask)
    params = {p.dtype for m in (model.server, proto.client, proto.server) for p in m.parameters()}
    return loss, probs, dict(wire.totals), sent, body, rest, params


@pytest.mark.parametrize("bf16_states", [False, True])
@pytest.mark.parametrize("layers,width,on_server,denoise", [
    ((0, 2), 8, True, True),      # HiddenEcho: two layers reduced on the server
    ((0, 1, 2), 8, False, True),  # Full: every layer at full width
    ((2,), 32, False, False),     # LDP: the last layer only
])
def test_bf16_body_sends_float32_and_the_same_bytes(layers, width, on_server, denoise,
                                                    bf16_states):
    fp32 = split_run("fp32", layers, width, on_server, denoise)
    bf16 = split_run("bf16", layers, width, on_server, denoise, bf16_states)
    loss, probs, totals, sent, body, rest, params = bf16
    # the body ran under autocast, nothing else did, and every parameter stayed fp32
    assert body == {torch.bfloat16} and fp32[4] == {torch.float32}
    assert rest == {torch.float32} and params == {torch.float32}
    # everything that crossed is fp32 (masks bool), hence the same bytes each way as in fp32
    floats = {dtype for _phase, name, _d, dtype in sent if name != "mask"}
    assert floats == {torch.float32}
    assert {name for _p, name, _d, _t in sent} == {"embeddings", "mask", "hidden_states",
                                                   "gradients"}
    assert totals == fp32[2]
    # rounding only: close to fp32, yet not equal (the autocast really ran)
    assert loss != fp32[0] and loss == pytest.approx(fp32[0], abs=1e-3)
    torch.testing.assert_close(probs, fp32[1], atol=1e-3, rtol=0)
    assert probs.dtype == torch.float32


def test_protocol_refuses_an_unknown_precision_or_a_cache_of_another():
    from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache
    from dpkit_hiddenecho.server import transformer_blocks

    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 2, 4.0, 0.0, None, top_layers=1)
    layout = Layout(layers=(2,), width=32, reduce_on_server=False, denoise=False)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="precision must be 'fp32' or 'bf16', got 'fp16'"):
        SplitProtocol(model, layout, 2, "mean", Wire(Ledger()), gen, precision="fp16")
    cache = FrozenBlockCache(model.server, transformer_blocks(model.server, 3), 2)
    with pytest.raises(ValueError, match="frozen-block cache is at precision 'fp32'"):
        SplitProtocol(model, layout, 2, "mean", Wire(Ledger()), gen, cache, precision="bf16")
