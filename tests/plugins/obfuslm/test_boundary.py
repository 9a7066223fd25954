"""ObfusLM across the process boundary: the server holds only what crossed the wire, loads only
public data, and computes the same thing in its own process as in this one."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest
import torch
from pydantic import Field

import dpkit
from dpkit.accounting import Ledger
from dpkit.boundary.public import PrivateDataError
from dpkit.boundary.session import connector
from dpkit.contract.context import RunContext
from dpkit.contract.plugins import get_registry
from dpkit.data.types import TextDataset, TextSplit
from dpkit.testing.boundary import server_of
from tests.plugins.obfuslm.conftest import obfus_registry, run_defense, tiny_corpus

FAST = {"epochs": 1, "batch_size": 32}


def reachable_tensors(root, seen=None) -> list[torch.Tensor]:
    """Every tensor reachable from ``root`` through attributes, containers and module state."""
    seen = set() if seen is None else seen
    if id(root) in seen or isinstance(root, (type, str, bytes, int, float)) or root is None:
        return []
    seen.add(id(root))
    if isinstance(root, torch.Tensor):
        return [root]
    if isinstance(root, torch.nn.Module):
        return list(root.state_dict().values())
    if isinstance(root, dict):
        children = list(root.values())
    elif isinstance(root, (list, tuple, set)):
        children = list(root)
    elif dataclasses.is_dataclass(root) or hasattr(root, "__dict__"):
        children = list(vars(root).values())
    else:
        return []
    return [t for child in children for t in reachable_tensors(child, seen)]


def test_the_server_holds_neither_the_key_nor_the_plain_ids(encoder, corpus):
    result, ctx = run_defense("obfuslm", {"k": 5, "beta": 0.9, **FAST}, encoder, corpus)
    server = server_of(ctx)
    key = result.truth["vocab_key"]
    inverse = torch.argsort(key)
    held = reachable_tensors(server)
    assert held, "the walk found nothing: it would pass for any server"
    for secret in (key, inverse):
        assert not any(t.shape == secret.shape and torch.equal(t.cpu(), secret) for t in held)
    train = server.received("train")
    received = torch.cat(train.documents())
    plain = inverse[received]  # the key maps what crossed back to what the client tokenized
    assert torch.equal(plain, torch.cat(result.truth["token_ids"][:len(train)]))
    assert float((received == plain).float().mean()) < 0.1  # the server got renamed ids


def test_id_stream_counts_the_real_tokens_the_server_received(encoder, corpus):
    _, ctx = run_defense("obfuslm", {"k": 5, "beta": 0.9, **FAST}, encoder, corpus)
    server = server_of(ctx)
    real = sum(int(server.received(phase).mask.sum()) for phase in ("train", "validation", "test"))
    (spend,) = [s for s in ctx.ledger.spends if s.label.startswith("token_ids")]
    assert ctx.wire.units["token_ids"] == real == spend.count
    # the padding crossed (as −1, verified by the wire) but counts nothing
    padded = sum(server.received(phase).ids.numel() for phase in ("train", "validation", "test"))
    assert padded > real and ctx.wire.bytes(direction="up", name="token_ids") == 8 * padded


class CopyOfPrivate:
    """An adversarial "public" dataset: the private corpus again (optionally with more texts)."""

    name: ClassVar[str] = "obfuslm_private_copy"

    class Params(dpkit.Params):
        extra: int = Field(0, ge=0)

    def __init__(self, params):
        self.params = params

    def load(self) -> TextDataset:
        private = tiny_corpus(160)
        more = tiny_corpus(self.params.extra, seed=99)["train"].texts if self.params.extra else []
        return TextDataset("renamed", {"train": TextSplit(list(private["train"].texts) + more)})


@pytest.mark.parametrize("extra", [0, 50])
def test_a_public_corpus_holding_private_records_is_refused(encoder, corpus, extra):
    registry = obfus_registry()
    if CopyOfPrivate.name not in registry.entries["dataset"]:
        registry.add("dataset", CopyOfPrivate, "obfuslm-tests")
    params = {"k": 5, "beta": 0.9, **FAST, "public_dataset": CopyOfPrivate.name,
              "public_params": {"extra": extra}}
    with pytest.raises(PrivateDataError, match="shares 160 records"):
        run_defense("obfuslm", params, encoder, corpus)


def test_the_server_in_its_own_process_computes_what_it_computes_here(corpus):
    """The model is loaded by name on both sides; a server that read the client's objects (the
    in-process host shares the model object) would differ from one in its own process."""
    registry = get_registry()
    ref = {"name": "tiny-encoder", "params": {}}
    model = registry.build("model", ref["name"], {}).load(torch.device("cpu"))
    results = {}
    for kind in ("inprocess", "process"):
        ctx = RunContext(dataset=corpus, model=model, device=torch.device("cpu"), seed=0,
                         ledger=Ledger(delta=1e-5), registry=registry, model_ref=ref,
                         connect=connector(kind))
        defense = registry.build("defense", "obfuslm", {"k": 5, "beta": 0.9, **FAST})
        result = defense.run(ctx)
        ctx.wire.channel().close()
        results[kind] = ({k: v for k, v in result.metrics.items() if not k.endswith("_s")},
                         result.training_curves, ctx.wire.summary())
    assert results["process"] == results["inprocess"]
