"""HiddenEcho on dpkit's wire: bytes counted equal the sizes of the tensors that crossed, each way,
and the server steps its own optimizer on the gradients that came up."""

import pytest
import torch

from dpkit.contract.plugins import get_registry
from dpkit.contract.releases import declare_releases
from dpkit.models import tiny_encoder
from dpkit.release.wire import DOWN, UP, tensor_bytes
from dpkit.testing.boundary import server_of
from dpkit.testing.params_contract import tiny_context
from dpkit_hiddenecho.body import transformer_blocks
from dpkit_hiddenecho.client import SplitClient
from dpkit_hiddenecho.layout import layout_for

from .test_defense import toy_dataset

BASE = {"eta": 40.0, "batch_size": 4, "lora_rank": 4, "lora_alpha": 8.0, "train_examples": 8,
        "test_examples": 8, "max_grad_norm": None}
CASES = {  # name: (defense, params) — layers sent, width, reduced where
    "hiddenecho": ("hiddenecho", {**BASE, "layers": "fixed", "reduction_factor": 4,
                                  "denoiser_heads": 2, "mine_tokens": 16}),  # 2 layers, server
    "full": ("hiddenecho_full", {**BASE, "reduction_factor": 4, "denoiser_heads": 2}),
    "ldp": ("hiddenecho_ldp", BASE),
}


def batch(model, b=4):
    ids, mask = model.tokenize(["the movie was good", "bad plot", "a great actor and a story",
                                "i hate it"][:b])
    clean = model.embed(ids).detach()
    noisy = (clean + 0.1 * torch.randn_like(clean)) * mask.unsqueeze(-1)
    return noisy, clean, mask.bool(), torch.tensor([1, 0, 1, 0][:b])


def deployment(case, precision="fp32", **extra):
    """A client talking to the defense's server over an in-process wire, schedule sent."""
    torch.manual_seed(0)
    name, params = CASES[case]
    model = tiny_encoder(32, 3, 2, 0)
    ctx = tiny_context(model, toy_dataset())
    defense = get_registry().build("defense", name, {**params, "precision": precision, **extra})
    declare_releases(defense, ctx)
    layout = layout_for(defense.params, model.num_layers, model.hidden_size)
    client = SplitClient(model, layout, 2, "mean", ctx.wire, torch.Generator().manual_seed(0))
    ctx.wire.phase = "setup"
    ctx.wire.send("schedule", torch.tensor([10]))
    return ctx, client, layout


@pytest.mark.parametrize("case,layers,width", [("hiddenecho", 2, 8), ("full", 3, 32),
                                               ("ldp", 1, 32)])
def test_protocol_bytes_equal_tensor_sizes(case, layers, width):
    ctx, client, layout = deployment(case)
    wire, server = ctx.wire, server_of(ctx)
    lora_b = {n: p.detach().clone() for n, p in server.model.server.named_parameters()
              if "lora_B" in n}
    noisy, clean, mask, labels = batch(client.model)
    wire.phase = "train"
    client.step(noisy, clean, mask, labels)
    b, n, d = noisy.shape
    hidden = layers * b * n * width * 4
    assert wire.bytes("train", UP, "embeddings") == tensor_bytes(noisy) == b * n * d * 4
    assert wire.bytes("train", DOWN, "embeddings") == hidden
    assert wire.bytes("train", UP, "gradients") == hidden  # every layer adapted: all graded
    # the server stepped its own optimizer: LoRA B (zero at the start) moved
    moved = [n for n, p in server.model.server.named_parameters()
             if "lora_B" in n and not torch.equal(p, lora_b[n])]
    assert moved
    client.train(False)
    wire.phase = "eval"
    probs = client.predict(noisy, clean, mask)
    assert torch.allclose(probs.sum(-1), torch.ones(b))
    assert wire.bytes("eval") == b * n * d * 4 + hidden


def test_gradients_go_up_only_for_states_with_trainable_server_parts():
    ctx, client, _ = deployment("full", lora_layers=1)
    noisy, clean, mask, labels = batch(client.model)
    ctx.wire.phase = "train"
    client.step(noisy, clean, mask, labels)
    b, n, d = noisy.shape
    assert ctx.wire.bytes("train", DOWN, "embeddings") == 3 * b * n * d * 4
    assert ctx.wire.bytes("train", UP, "gradients") == 1 * b * n * d * 4


def test_lora_on_top_layers_only():
    from dpkit_hiddenecho.body import attach_lora

    model = tiny_encoder(32, 3, 2, 0)
    attach_lora(model, 2, 4.0, 0.0, None, top_layers=1)
    names = [n for n, p in model.server.named_parameters() if p.requires_grad]
    assert names and all("layer.2." in n and "lora_" in n for n in names)


def spy_on_sends(wire):
    """Record (phase, name, direction, dtype) of every tensor crossing ``wire`` each way."""
    sent, send = [], wire.send

    def spy(name, tensor=None):
        if tensor is not None:
            sent.append((wire.phase, name, UP, tensor.dtype))
        answer = send(name, tensor)
        if isinstance(answer, dict):
            sent.extend((wire.phase, name, DOWN, s.dtype) for s in answer.get("states", ()))
        return answer

    wire.send = spy
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
    def cast(_module, _inputs, output):
        if not torch.is_autocast_enabled("cpu"):
            return output
        if isinstance(output, tuple):
            return (output[0].to(torch.bfloat16), *output[1:])
        return output.to(torch.bfloat16)

    transformer_blocks(model.server, model.num_layers)[-1].register_forward_hook(cast)


def split_run(case, precision, bf16_states=False):
    """One training step and one inference batch at ``precision``: (loss, probabilities, bytes
    by (phase, direction, name), sends, output dtypes of the server body's / the rest's
    linear layers, parameter dtypes)."""
    ctx, client, _ = deployment(case, precision)
    server = server_of(ctx)
    if bf16_states:
        bf16_last_block(server.model)
    body = linear_output_dtypes([server.model.server])
    rest = linear_output_dtypes([client.modules, server.modules])
    sent = spy_on_sends(ctx.wire)
    noisy, clean, mask, labels = batch(client.model)
    ctx.wire.phase = "train"
    loss = client.step(noisy, clean, mask, labels)
    client.train(False)
    ctx.wire.phase = "eval"
    probs = client.predict(noisy, clean, mask)
    params = {p.dtype for m in (server.model.server, client.modules, server.modules)
              for p in m.parameters()}
    totals = {(p, d, k): ctx.wire.bytes(p, d, k) for p in ("train", "eval") for d in (UP, DOWN)
              for k in ("embeddings", "gradients")}
    return loss, probs, totals, sent, body, rest, params


@pytest.mark.parametrize("bf16_states", [False, True])
@pytest.mark.parametrize("case", ["hiddenecho", "full", "ldp"])
def test_bf16_body_sends_float32_and_the_same_bytes(case, bf16_states):
    fp32 = split_run(case, "fp32")
    loss, probs, totals, sent, body, rest, params = split_run(case, "bf16", bf16_states)
    # the body ran under autocast, nothing else did, and every parameter stayed fp32
    assert body == {torch.bfloat16} and fp32[4] == {torch.float32}
    assert rest == {torch.float32} and params == {torch.float32}
    # everything that crossed is fp32, hence the same bytes each way as in fp32
    assert {dtype for _p, _n, _d, dtype in sent} == {torch.float32}
    assert {name for _p, name, _d, _t in sent} == {"embeddings", "gradients"}
    assert totals == fp32[2]
    # rounding only: close to fp32, yet not equal (the autocast really ran)
    assert loss != fp32[0] and loss == pytest.approx(fp32[0], abs=1e-3)
    torch.testing.assert_close(probs, fp32[1], atol=1e-3, rtol=0)
    assert probs.dtype == torch.float32

