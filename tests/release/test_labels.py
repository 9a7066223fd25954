"""A message's labels — its phase, a request's name, an empty tensor's shape, a release's name —
are the server's or plain, never a string or number the client makes up at run time."""

from __future__ import annotations

import math

import pytest
import torch

from dpkit.accounting import Ledger, MetricDpGuarantee
from dpkit.base.errors import AccountingError
from dpkit.contract.server import STANDARD_PHASES
from dpkit.release.codec import decode, encode
from dpkit.release.labels import Labels
from dpkit.release.wire import Release, Wire
from dpkit.testing.boundary import recording_wire

ETA = MetricDpGuarantee(5.0, "l2", "glove")


def test_a_phase_the_server_did_not_name_is_refused_before_it_crosses():
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=4),
                                   phases=("layer_filter",))
    wire.phase = "layer_filter"
    wire.send("embeddings", torch.zeros(2, 3))
    wire.phase = "raw_3f800000" + "00" * 40  # data spelled in hexadecimal
    with pytest.raises(AccountingError, match="is not one the server takes .*Nothing was sent"):
        wire.send("embeddings", torch.zeros(2, 3))
    assert [m["phase"] for m in channel.got] == ["layer_filter"]
    assert wire.units["embeddings"] == 2 and wire.ledger.epsilon() < math.inf


def test_a_request_must_name_a_handler():
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=4),
                                   handlers=("report",))
    wire.send("report")
    with pytest.raises(AccountingError, match="names no handler"):
        wire.send("text_the private sentence")
    assert [m["name"] for m in channel.got] == ["report"] and wire.units["embeddings"] == 0


def test_the_server_is_asked_once_before_the_first_message_and_an_unclear_answer_refuses():
    asked: list[str] = []

    class Channel:
        def __init__(self, answer):
            self.answer = answer

        def request(self, data: bytes) -> bytes:
            asked.append(decode(data)["op"])
            return encode(self.answer if asked[-1] == "labels" else None)

        def close(self) -> None:
            pass

    good = Channel({"phases": list(STANDARD_PHASES), "handlers": [], "releases": ["x"]})
    wire = Wire(Ledger(), connect=lambda: good)
    wire.declare([Release("x", ETA, "x", count=9)])
    for _ in range(3):
        wire.send("x", torch.ones(1, 2))
    assert asked == ["labels", "message", "message", "message"]
    for answer in (None, {"phases": "run", "handlers": [], "releases": ["x"]},
                   {"phases": [1], "handlers": [], "releases": ["x"]},
                   {"phases": ["run"], "releases": ["x"]},
                   {"phases": ["run"], "handlers": [], "releases": "x"},
                   {"phases": ["run"], "handlers": []}):
        asked.clear()
        bad = Channel(answer)
        wire = Wire(Ledger(), connect=lambda bad=bad: bad)
        wire.declare([Release("x", ETA, "x", count=9)])
        with pytest.raises(AccountingError, match="did not say which phases"):
            wire.send("x", torch.ones(1, 2))
        assert asked == ["labels"]  # nothing else crossed


@pytest.mark.parametrize("name", ["", "has space", "1leading_digit", "x" * 65, "a/b", "näme",
                                  "text:hello"])
def test_a_release_name_is_a_short_plain_label(name):
    with pytest.raises(AccountingError, match="plain name"):
        Release(name, ETA, "label")
    with pytest.raises(AccountingError, match="plain name"):
        Release.uncovered(name, "a reason")


def test_plain_release_names_are_taken():
    for name in ("embeddings", "token_ids", "_private", "layer.3-q", "x" * 64):
        assert Release(name, ETA, "label").name == name
    assert Labels(frozenset({"run"}), frozenset(), frozenset({"x"})).check(
        "run", "x", torch.ones(1)) is None


def test_a_tensor_under_a_name_the_server_does_not_take_is_refused_before_it_crosses():
    """Adversarial: a declared, covered release whose name spells raw data (one row sent, the
    name's 64 characters uncounted)."""
    spelled = "r" + bytes(range(20, 51)).hex()
    wire, channel = recording_wire(Release("embeddings", ETA, "tokens", count=4),
                                   Release(spelled, ETA, "tokens", count=1), receives=("embeddings",))
    wire.send("embeddings", torch.zeros(1, 2))
    with pytest.raises(AccountingError, match="is not one the server takes"):
        wire.send(spelled, torch.zeros(1, 2))
    assert [m["name"] for m in channel.got] == ["embeddings"] and wire.units[spelled] == 0


def test_a_server_takes_standard_names_its_handlers_and_what_it_receives():
    from dpkit.boundary.host import ServerHost
    from dpkit.contract.server import STANDARD_RELEASES, Server, handles

    class Named(Server):
        receives = ("layer_3",)

        @handles("report")
        def report(self, message):
            return None

    taken = ServerHost._labels(Named)["releases"]
    assert taken == sorted({*STANDARD_RELEASES, "layer_3", "report"})
    assert ServerHost._labels(Server)["releases"] == sorted(STANDARD_RELEASES)


LONG = "raw_" + "ab" * 40  # 84 characters: shown as its first 60 and "…"
SHOWN = repr(LONG[:60] + "…")


def test_each_refusal_says_what_was_refused_and_what_to_do():
    wire, _ = recording_wire(Release("embeddings", ETA, "tokens", count=4), handlers=("report",))
    wire.phase = LONG
    with pytest.raises(AccountingError) as refused:
        wire.send("embeddings", torch.zeros(1, 2))
    assert str(refused.value) == (
        f"phase {SHOWN} is not one the server takes ['eval', 'restore', 'run', 'setup', 'test', "
        "'train', 'validation']; a phase is a label the server names in advance "
        "(dpkit.Server.phases), since one made up at run time could spell private data. Nothing "
        "was sent")
    wire.phase = "run"
    with pytest.raises(AccountingError) as refused:
        wire.send(LONG)
    assert str(refused.value) == (
        f"request {SHOWN} names no handler of the server ['report']; a request carries only its "
        "name, which must be a handler's. Nothing was sent")
    with pytest.raises(AccountingError) as refused:
        Labels.from_answer(["run"])
    assert str(refused.value) == ("the server did not say which phases, handlers and releases "
                                  "it takes (got list); nothing was sent")
    with pytest.raises(AccountingError) as refused:
        wire.send("x" + LONG, torch.zeros(1, 2))
    assert str(refused.value) == (
        f"release {repr(('x' + LONG)[:60] + '…')} is not one the server takes; it takes "
        "['embeddings', 'gradients', 'hidden_states', 'labels', 'model', 'report', "
        "'substituted_ids', 'token_ids']. A release's name crosses with each message, so it "
        "comes from the server's class: give it a handler (@dpkit.handles), list it in "
        "dpkit.Server.receives, or use a standard name (dpkit.STANDARD_RELEASES). Nothing was "
        "sent")
    with pytest.raises(AccountingError) as refused:
        Release(LONG + " x", ETA, "label")
    assert str(refused.value) == (
        f"release name {SHOWN} must be a plain name (a letter or _, then up to 63 letters, "
        "digits, _ . or -): it crosses the wire with every message, uncounted, so it stays a "
        "short plain label")


def test_a_label_is_shown_whole_up_to_sixty_characters():
    from dpkit.release.labels import short_label

    assert short_label("x" * 60) == repr("x" * 60)
    assert short_label("x" * 61) == repr("x" * 60 + "…")
    assert short_label(None) == "None" and short_label(7) == "7"
