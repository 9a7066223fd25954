"""HiddenEcho's client on a recording wire: what each exchange sends up (noisy rows with zeroed
padding, the gradients of exactly the states the server asked for) and what it hands back."""

from __future__ import annotations

import copy

import pytest
import torch
from dpkit_hiddenecho.client import PADDING, SplitClient, zero_padding
from dpkit_hiddenecho.layout import Layout

from dpkit.models import tiny_encoder

DIM, CLASSES = 8, 3


class RecordingWire:
    """Answers every embeddings upload with ``states`` (and ``needs_grad``); records each send."""

    def __init__(self, states: list[torch.Tensor], needs_grad: list[int]) -> None:
        self.states, self.needs_grad = states, needs_grad
        self.sent: list[tuple[str, torch.Tensor | None]] = []
        self.batches_ended = 0

    def send(self, name, tensor=None):
        self.sent.append((name, tensor))
        if name == "embeddings":
            return {"states": [s.clone() for s in self.states],
                    "needs_grad": torch.tensor(self.needs_grad)}
        return None

    def end_batch(self) -> None:
        self.batches_ended += 1


@pytest.fixture(scope="module")
def model():
    return tiny_encoder(DIM, 1, 2, 0)


def batch(n=5):
    """Noisy and clean rows ``[2, n, DIM]`` (n ≠ DIM), the second text two tokens shorter."""
    gen = torch.Generator().manual_seed(1)
    noisy = torch.randn(2, n, DIM, generator=gen) + 3.0
    clean = torch.randn(2, n, DIM, generator=gen)
    mask = torch.ones(2, n, dtype=torch.bool)
    mask[1, n - 2:] = False
    return noisy, clean, mask, torch.tensor([2, 0])


def client_on(model, wire, layers=(0, 1), denoise=False) -> SplitClient:
    """A client without denoiser (its prediction reads the last received state only), or with
    one correcting the received states (reduced to DIM // 2 on the server) with the clean rows."""
    layout = Layout(layers=layers, width=DIM // 2 if denoise else DIM, reduce_on_server=denoise,
                    denoise=denoise, heads=2, dropout=0.0)
    torch.manual_seed(0)
    return SplitClient(model, layout, CLASSES, "mean", wire, torch.Generator().manual_seed(0))


def states(n=5, count=2, width=DIM):
    gen = torch.Generator().manual_seed(2)
    return [torch.randn(2, n, width, generator=gen) for _ in range(count)]


def test_zero_padding_zeroes_exactly_the_rows_outside_the_mask():
    noisy, _, mask, _ = batch()
    out = zero_padding(noisy, mask.long())
    assert out.shape == noisy.shape
    assert torch.equal(out[mask], noisy[mask])
    assert bool((out[~mask] == PADDING).all()) and PADDING == 0.0
    assert torch.equal(noisy, batch()[0]), "the caller's rows are left as they were"


def test_an_upload_sends_the_noisy_rows_with_zeroed_padding_and_returns_the_answer(model):
    noisy, _, mask, _ = batch()
    wire = RecordingWire(states(), [1, 0])
    received, needs_grad = client_on(model, wire).upload(noisy, mask)
    ((name, sent),) = wire.sent
    assert name == "embeddings" and torch.equal(sent, zero_padding(noisy, mask))
    assert isinstance(received, list) and all(torch.equal(a, b) for a, b in zip(received, states()))
    assert needs_grad == [1, 0] and all(type(i) is int for i in needs_grad)


def expected_gradients(client, clean, mask, labels, needs_grad):
    """d(task loss)/d(each asked-for state), from a copy of the client's modules."""
    modules = copy.deepcopy(client.modules)
    received = [s.clone().requires_grad_(True) for s in states()]
    logits = modules.head(received[-1], mask)
    torch.nn.functional.cross_entropy(logits, labels).backward()
    return [received[i].grad if received[i].grad is not None else torch.zeros_like(received[i])
            for i in needs_grad]


def test_a_step_sends_the_gradients_of_exactly_the_asked_for_states_then_ends_the_batch(model):
    noisy, clean, mask, labels = batch()
    wire = RecordingWire(states(), [1, 0])  # state 0 is not read: its gradient is zero
    client = client_on(model, wire)
    expected = expected_gradients(client, clean, mask, labels, [1, 0])
    assert expected[0].abs().sum() > 0 and not expected[1].any()
    loss = client.step(noisy, clean, mask, labels)
    assert [name for name, _ in wire.sent] == ["embeddings", "gradients"]
    assert torch.equal(wire.sent[0][1], zero_padding(noisy, mask))
    torch.testing.assert_close(wire.sent[1][1], torch.stack(expected))
    assert wire.batches_ended == 1
    with torch.no_grad():  # the step does not update the client's modules: the same loss
        task = torch.nn.functional.cross_entropy(client.modules.head(states()[-1], mask), labels)
    assert isinstance(loss, float) and loss == pytest.approx(float(task))


def test_a_step_without_states_to_train_sends_an_empty_gradient_message(model):
    noisy, clean, mask, labels = batch()
    wire = RecordingWire(states(), [])
    client_on(model, wire).step(noisy, clean, mask, labels)
    assert [name for name, _ in wire.sent] == ["embeddings", "gradients"]
    assert wire.sent[1][1].shape == (0,) and wire.batches_ended == 1


def test_a_prediction_sends_the_noisy_rows_and_gives_each_text_a_distribution(model):
    noisy, clean, mask, _ = batch()
    wire = RecordingWire(states(), [])
    client = client_on(model, wire)
    client.train(False)
    probs = client.predict(noisy, clean, mask)
    ((name, sent),) = wire.sent
    assert name == "embeddings" and torch.equal(sent, zero_padding(noisy, mask))
    assert probs.shape == (2, CLASSES) and wire.batches_ended == 1
    torch.testing.assert_close(probs, client.modules.head(states()[-1], mask).softmax(-1))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))


def test_the_clean_rows_steer_the_correction_but_never_cross(model):
    noisy, clean, mask, labels = batch()
    other = clean.flip(1)
    runs = []
    for rows in (clean, other):
        wire = RecordingWire(states(width=DIM // 2), [0, 1])
        client = client_on(model, wire, denoise=True)
        loss = client.step(noisy, rows, mask, labels)
        client.train(False)
        runs.append((loss, client.predict(noisy, rows, mask), wire.sent))
    (loss, probs, sent), (other_loss, other_probs, other_sent) = runs
    assert loss != other_loss and not torch.allclose(probs, other_probs)
    uploads = [t for name, t in sent if name == "embeddings"]
    assert len(uploads) == 2 and all(torch.equal(t, zero_padding(noisy, mask)) for t in uploads)
    assert all(torch.equal(a, b) for (n, a), (_, b) in zip(sent, other_sent) if n == "embeddings")
