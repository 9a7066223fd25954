"""What the server process is given (public things only) and which cache folders it may not read."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.boundary.public import PrivateDataError
from dpkit.boundary.session import approved_datasets, cross_check, init_payload
from dpkit.contract.context import RunContext
from dpkit.contract.privacy import PrivacySettings
from dpkit.release.codec import decode, encode


def _ctx(registry, tmp_path, **over):
    args = {"dataset": None, "model": None, "device": torch.device("cpu"), "seed": 7,
            "ledger": Ledger(3e-6, accountant="pld"), "registry": registry,
            "cache_dir": tmp_path / "cache" / "artifacts"}
    return RunContext(**{**args, **over})


def test_the_server_is_built_from_public_things_only(toy_registry, tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "require")
    model = tmp_path / "model"
    model.mkdir()
    ctx = _ctx(toy_registry, tmp_path, options={"record_uploads": 1},
               model_ref={"name": "toy_space", "params": {"path": str(model)}})
    defense = toy_registry.build("defense", "toy_noise", {"eta": 2.0})
    init = init_payload(defense, ctx)
    assert init == {
        "defense": "toy_noise", "params": defense.params.model_dump(mode="json"),
        "model": ctx.model_ref, "datasets": [], "device": "cpu",
        "seed": ctx.server_seed,  # derived: the client's own draws cannot be regenerated from it
        "privacy": {"delta": 3e-6, "accountant": "pld"},
        "plugins": dict(toy_registry.modules),
        "artifacts": str(tmp_path / "cache" / "server-artifacts"),  # not the client's artifacts
        "public_paths": [str(model.resolve())], "record": True, "confine": "require",
        "private_paths": []}
    assert init["seed"] != ctx.seed and init["artifacts"] != str(ctx.cache_dir)
    assert decode(encode(init)) == init  # data only: it crosses as bytes


def test_the_spec_privacy_settings_reach_the_server_as_stated(toy_registry, tmp_path):
    settings = PrivacySettings(delta=1e-7, accountant="pld", neighboring="replace_one")
    ctx = _ctx(toy_registry, tmp_path, privacy=settings)
    init = init_payload(toy_registry.build("defense", "toy_noise", {}), ctx)
    assert init["privacy"] == settings.model_dump(mode="json")
    assert init["record"] is False


def test_a_public_dataset_sharing_records_with_the_private_one_is_refused(toy_registry, tmp_path):
    private = toy_registry.build("dataset", "toy_text", {}).load()
    ctx = _ctx(toy_registry, tmp_path, dataset=private)
    defense = toy_registry.build("defense", "leak_private_data", {})
    with pytest.raises(PrivateDataError, match=r"asks for dataset 'toy_text', which shares \d+ "
                       r"records with the cell's private dataset 'toy_text'; a server may only load public"):
        approved_datasets(defense, ctx)
    assert approved_datasets(defense, _ctx(toy_registry, tmp_path)) == [
        {"name": "toy_text", "params": {"n_docs": 48}}]  # no private dataset: nothing to share


class _Told:
    """A channel whose server says ``arrived`` (messages, bytes) when asked for its tally."""

    def __init__(self, messages: dict, nbytes: dict):
        self.arrived = {"messages": messages, "bytes": nbytes, "digests": {}}

    def request(self, data: bytes) -> bytes:
        assert decode(data) == {"op": "tally"}
        return encode(self.arrived)


def _wire(messages: dict, up: dict, down: dict):
    totals = {**{("run", "up", k): n for k, n in up.items()},
              **{("run", "down", k): n for k, n in down.items()}}
    return SimpleNamespace(_meter=SimpleNamespace(messages=messages, totals=totals),
                           ledger=Ledger(1e-5))


def test_what_arrived_as_the_meter_counted_charges_nothing():
    wire = _wire({"rows": 2, "ask": 1}, {"rows": 256, "ask": 0}, {"rows": 999, "ask": 64})
    assert cross_check(_Told({"rows": 2, "ask": 1}, {"rows": 256}), wire) == []
    assert wire.ledger.spends == ()


@pytest.mark.parametrize("messages, nbytes, odd", [
    ({"rows": 3, "ask": 1}, {"rows": 256}, ["rows"]),              # one message more
    ({"rows": 2, "ask": 1}, {"rows": 257}, ["rows"]),              # one byte more
    ({"rows": 2, "ask": 1, "side": 1}, {"rows": 256}, ["side"]),   # a name the meter never saw
    ({"rows": 2}, {"rows": 256, "ask": 8}, ["ask"]),               # bytes on a bodiless request
    ({"rows": 1, "ask": 0}, {"rows": 128}, ["ask", "rows"])])       # fewer: the meter is off too
def test_what_arrived_outside_the_wire_is_named_and_charged_infinite(messages, nbytes, odd):
    wire = _wire({"rows": 2, "ask": 1}, {"rows": 256, "ask": 0}, {"rows": 999})
    assert cross_check(_Told(messages, nbytes), wire) == odd
    assert [s.label for s in wire.ledger.spends] == [f"{name} (outside the wire)" for name in odd]
    assert wire.ledger.epsilon() == math.inf
    name = odd[0]
    counted = {"rows": (2, 256), "ask": (1, 0), "side": (0, 0)}[name]
    assert wire.ledger.spends[0].guarantee.reason == (
        f"{name}: the server received {messages.get(name, 0)} message(s), {nbytes.get(name, 0)} "
        f"bytes, but the runner's wire metered {counted[0]} message(s), {counted[1]} bytes: "
        "something crossed outside ctx.wire")


def test_the_server_gets_the_public_datasets_it_asked_for(toy_registry, tmp_path):
    init = init_payload(toy_registry.build("defense", "leak_private_data", {}), _ctx(toy_registry, tmp_path))
    assert init["datasets"] == [{"name": "toy_text", "params": {"n_docs": 48}}]
    assert init["public_paths"] == []  # none of their params names a file
