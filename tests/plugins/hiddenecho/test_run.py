"""HiddenEcho's run on a tiny cell: each split is privatized once, from its own stream of the run's
noise secret; every row that goes up (training, layer filter, inference) is one of those noisy
rows, the wire counts exactly the declared tokens, and the reported metrics and the attacks'
truth describe what was sent."""

from __future__ import annotations

import warnings

import dpkit_hiddenecho.defense as defense_module
import peft  # noqa: F401  (imported at collection, as the registry below: not once per test
import pytest
import sklearn.metrics  # noqa: F401  process, as mutation testing forks one per mutant)
import torch
from dpkit_hiddenecho.client import zero_padding
from dpkit_hiddenecho.data import pad_batch, privatize_split
from dpkit_hiddenecho.layout import special_positions

from dpkit import knn_recovery
from dpkit.contract.plugins import get_registry
from dpkit.data.types import TextDataset
from dpkit.models import tiny_encoder
from dpkit.release.wire import DOWN, UP
from dpkit.testing.boundary import server_view
from dpkit.testing.params_contract import tiny_context

from .test_defense import toy_dataset

SMALL = {"eta": 200.0, "epochs": 1, "batch_size": 8, "train_examples": 12, "test_examples": 6,
         "lora_rank": 2, "max_length": 10, "attack_tokens": 20}  # η: some tokens inverted
HE = {**SMALL, "reduction_factor": 4, "denoiser_heads": 2, "ig_samples": 3, "ig_steps": 2,
      "mine_tokens": 16}
REGISTRY = get_registry()
CELLS = {"hiddenecho_ldp": SMALL, "hiddenecho": HE, "hiddenecho_full": HE}
SECRET = "the client's secret"


class Cell:
    """One run of ``name`` with its noise draws, sends (with answers), layouts and messages."""

    def __init__(self, model, name: str, dataset=None) -> None:
        self.model, self.drawn, self.sent, self.layouts, self.messages = model, [], [], [], []
        self.ctx = tiny_context(model, dataset or toy_dataset())
        self.ctx.noise_secret, self.ctx.progress = SECRET, self.messages.append
        self.defense = REGISTRY.build("defense", name, CELLS[name])
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(defense_module, "privatize_split", self.privatize)
            patch.setattr(self.defense, "layout", self.layout)
            patch.setattr(self.ctx.wire, "send", self.send)
            torch.manual_seed(0)
            self.result = self.defense.run(self.ctx)
        self.prepared = self.defense._prepared(self.ctx)

    def privatize(self, model, ids, labels, mechanism, space, generator):
        seed = generator.initial_seed()
        out = privatize_split(model, ids, labels, mechanism, space, generator)
        self.drawn.append((ids, labels, mechanism, space, seed, out))
        return out

    def layout(self, *args):
        self.layouts.append(type(self.defense).layout(self.defense, *args))
        return self.layouts[-1]

    def send(self, name, tensor=None):
        answer = type(self.ctx.wire).send(self.ctx.wire, name, tensor)
        self.sent.append((self.ctx.wire.phase, name, tensor, answer))
        return answer


@pytest.fixture(scope="module")
def model():
    return tiny_encoder(16, 3, 2, 0)


@pytest.fixture
def cells(model):
    """Runs a cell inside each test (not once per module: mutation testing maps each test to
    the functions it runs)."""
    return lambda name, dataset=None: Cell(model, name, dataset)


def test_each_split_is_privatized_once_from_its_own_stream_of_the_noise_secret(cells):
    named = toy_dataset()  # without class names: the client counts the classes in its labels
    cell = cells("hiddenecho_ldp", TextDataset(named.name, named.splits))
    ctx, st = cell.ctx, cell.prepared
    assert [len(ids) for ids, *_ in cell.drawn] == [12, 6]
    streams = [ctx.noise_generator(f"hiddenecho/noise/{s}").initial_seed() for s in ("train", "test")]
    assert [seed for *_, seed, _ in cell.drawn] == streams and streams[0] != streams[1]
    public = {ctx.generator(f"hiddenecho/noise/{s}").initial_seed() for s in ("train", "test")}
    assert not public & set(streams), "the noise must depend on the client's secret"
    for split, (ids, labels, mechanism, space, _, out) in zip(("train", "test"), cell.drawn):
        assert ids is st.ids[split] and labels == st.texts[split][1]
        assert mechanism is st.mechanism and space is st.space
        again = privatize_split(cell.model, ids, labels, mechanism, space,
                                ctx.noise_generator(f"hiddenecho/noise/{split}"))
        assert all(torch.equal(a, b) for a, b in zip(out.noisy, again.noisy))


@pytest.mark.parametrize("name", list(CELLS))
def test_every_row_sent_up_is_a_privatized_row_and_the_wire_counts_the_declaration(cells, name):
    cell = cells(name)
    privatized = torch.cat([row for *_, out in cell.drawn for row in out.noisy])
    uploads = [tensor for _, kind, tensor, _ in cell.sent if kind == "embeddings"]
    assert uploads
    for rows in uploads:
        real = rows.reshape(-1, rows.shape[-1])
        real = real[real.abs().sum(-1) > 0]
        assert (real[:, None, :] == privatized[None]).all(-1).any(-1).all()
    declared = cell.ctx.ledger.spends[0]
    n_tokens = sum(out.n_tokens for *_, out in cell.drawn)
    assert declared.count == n_tokens and len(cell.ctx.ledger.spends) == 3  # nothing over
    assert cell.ctx.wire.units["embeddings"] == n_tokens  # each row once, reuses free


def test_the_layer_filter_sends_the_fit_rows_the_public_ig_stream_picks(cells):
    cell = cells("hiddenecho")
    ctx, model, p = cell.ctx, cell.model, cell.defense.params
    (sent, answer), = [(t, a) for phase, _, t, a in cell.sent if phase == "layer_filter"]
    train = cell.drawn[0][-1]
    fit = len(train) - cell.prepared.n_val
    pick = torch.randperm(fit, generator=ctx.generator("hiddenecho/ig", "cpu"))[:p.ig_samples]
    _, noisy, _, mask, _ = pad_batch(model, train, pick.tolist(), model.tokenizer.pad_token_id)
    assert torch.equal(sent, zero_padding(noisy, mask))
    layers = [int(i) for i in answer["layers"]]
    assert cell.layouts[-1].layers == tuple(layers)
    contributions = [round(float(s), 4) for s in answer["contributions"]]
    assert f"hiddenecho: sending blocks {layers}; IG contributions {contributions}" in cell.messages


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_layer_filter_picks_from_its_public_cpu_stream_on_a_cuda_cell(model):
    """The IG pick is a CPU stream whatever the cell's device: a CUDA cell sends the same rows
    (torch.randperm draws on the CPU and refuses a CUDA generator)."""
    defense = REGISTRY.build("defense", "hiddenecho", HE)
    prepared_on = tiny_context(model, toy_dataset())
    st = defense._prepared(prepared_on)
    train = privatize_split(model, st.ids["train"], st.texts["train"][1], st.mechanism, st.space,
                            prepared_on.noise_generator("hiddenecho/noise/train"))

    def sent_on(device):
        ctx, sent = tiny_context(model, toy_dataset()), []
        ctx.device = torch.device(device)
        ctx.wire.send = lambda name, tensor=None: sent.append(tensor) or {"layers": [1],
                                                                          "contributions": [0.5]}
        assert defense.filter_layers(model, train, ctx) == [1]
        return sent

    (on_cuda,), (on_cpu,) = sent_on("cuda"), sent_on("cpu")
    assert torch.equal(on_cuda, on_cpu)


@pytest.mark.parametrize("name", list(CELLS))
def test_the_metrics_and_the_truth_describe_what_was_sent(cells, name):
    cell = cells(name)
    ctx, model, result, m = cell.ctx, cell.model, cell.result, cell.result.metrics
    (layout,) = cell.layouts
    wire = ctx.wire
    assert m["layers_sent"] == len(layout.layers) and m["lowest_layer_sent"] == min(layout.layers)
    tokens_sent = wire.bytes("eval", UP, "embeddings") // (4 * model.hidden_size)  # padding too
    assert m["width_sent"] * m["layers_sent"] * tokens_sent * 4 == wire.bytes("eval", DOWN)
    assert m["tokens_privatized"] == ctx.ledger.spends[0].count
    test = cell.drawn[1][-1]
    lead, trail = special_positions(model.tokenizer)
    truth = torch.cat([ids[lead:len(ids) - trail] for ids in test.ids])[:SMALL["attack_tokens"]]
    assert torch.equal(result.truth["token_ids"], truth)
    kept = server_view(ctx)["embeddings"]
    space = cell.prepared.space
    inverted = knn_recovery(kept, space.vectors, truth, (1,))[1]
    assert m["ep"] == 1.0 - inverted and 0.0 < inverted < 1.0
    assert result.wire_bytes == wire.summary() and result.training_curves


@pytest.mark.parametrize("name", ["hiddenecho_ldp", "hiddenecho"])
def test_bf16_on_a_cpu_that_emulates_it_is_warned_of_once(model, name, monkeypatch):
    from dpkit.ml import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    precision._warn.cache_clear()
    try:
        ctx = tiny_context(model, toy_dataset())
        defense = REGISTRY.build("defense", name, {**CELLS[name], "precision": "bf16"})
        with pytest.warns(RuntimeWarning, match=rf"^{name}: precision 'bf16' on a CPU without"):
            defense._prepared(ctx)
        fp32 = REGISTRY.build("defense", name, CELLS[name])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fp32._prepared(tiny_context(model, toy_dataset()))
    finally:
        precision._warn.cache_clear()
