"""RunContext: per-run state built once per owner and cell; the seeded streams every cell draws
from (release noise keyed by the run's secret, the cell's seed and the stream, never shared)."""

from __future__ import annotations

import pytest
import torch

from dpkit.accounting import Ledger
from dpkit.contract.context import RunContext, derive_seed
from dpkit.contract.plugins import get_registry


def _ctx() -> RunContext:
    return RunContext(dataset=None, model=None, device=torch.device("cpu"), seed=0,
                      ledger=Ledger(), registry=get_registry())


def test_built_once_per_owner_and_run():
    ctx, calls = _ctx(), []
    first, second = object(), object()
    build = lambda tag: (lambda: calls.append(tag) or tag)  # noqa: E731
    assert ctx.prepared(first, build("a")) == "a"
    assert ctx.prepared(first, build("again")) == "a"
    assert ctx.prepared(second, build("b")) == "b"
    assert calls == ["a", "b"]
    assert _ctx().prepared(first, build("c")) == "c"  # another cell prepares afresh


# ----------------------------------------------------------------- the seeded streams
SECRETS, SEEDS, STREAMS = ("first-secret", "second-secret"), (0, 1), ("up", "embeddings")


def _cell(seed: int = 0, secret: str | None = None, device: str = "cpu") -> RunContext:
    return RunContext(dataset=None, model=None, device=torch.device(device), seed=seed,
                      ledger=Ledger(), registry=get_registry(), noise_secret=secret)


def _draws(gen: torch.Generator) -> torch.Tensor:
    return torch.rand(512, generator=gen, dtype=torch.float64)


def test_the_derivation_is_the_public_rule_so_a_run_can_be_redrawn_from_its_secret():
    """sha256 of the seed and each stream name after a NUL, its first 8 bytes little-endian, 63 bits:
    an auditor holding a run's secret redraws its noise, and a run resumed by a later dpkit
    continues the draws its finished cells were paired with."""
    import hashlib

    digest = hashlib.sha256(b"7" + b"\0release-noise" + b"\0s3cret" + b"\0up").digest()
    assert derive_seed(7, "release-noise", "s3cret", "up") == \
        int.from_bytes(digest[:8], "little") >> 1
    expected = torch.Generator().manual_seed(derive_seed(7, "release-noise", "s3cret", "up"))
    assert torch.equal(_draws(_cell(7, "s3cret").noise_generator("up")), _draws(expected))


def test_a_seed_depends_on_every_component_of_the_key_and_where_it_ends():
    keys = [(0,), (1,), (10,), (1, "0"), (0, "a", "b"), (0, "ab"), (0, "b", "a"), (0, "a"),
            (0, "a", ""), (0, "")]
    assert len({derive_seed(*k) for k in keys}) == len(keys)
    assert derive_seed(3, "a", "b") == derive_seed(3, "a", "b")


def test_a_seed_spans_63_bits_and_a_numpy_seed_32():
    seeds = [derive_seed(s, "stream") for s in range(64)]
    assert all(0 <= s < 2**63 for s in seeds) and max(seeds) >= 2**62
    cell = _cell(5)
    numpy = [cell.numpy_seed(f"kmeans{i}") for i in range(64)]
    assert all(type(s) is int and 0 <= s < 2**32 for s in numpy) and max(numpy) >= 2**31
    assert numpy[0] == derive_seed(5, "kmeans0") % 2**32  # derived like generator("kmeans0")
    assert _cell(6).numpy_seed("kmeans0") != numpy[0] != numpy[1]


def test_two_cells_seeds_streams_or_secrets_never_share_a_draw():
    """Every (secret, seed, stream) key its own stream, none sharing a value with another, nor
    with the public streams a server that knows the spec's seeds can regenerate."""
    draws = {(secret, seed, stream): _draws(_cell(seed, secret).noise_generator(stream))
             for secret in SECRETS for seed in SEEDS for stream in STREAMS}
    draws.update({(None, seed, stream): _draws(_cell(seed).generator(stream))
                  for seed in SEEDS for stream in STREAMS})
    values = [set(d.tolist()) for d in draws.values()]
    assert all(not (a & b) for i, a in enumerate(values) for b in values[i + 1:])


def test_the_same_secret_cell_and_stream_draws_the_same_noise_again():
    for key in [(0, "first-secret", "up"), (1, "second-secret", "embeddings")]:
        seed, secret, stream = key
        first = _draws(_cell(seed, secret).noise_generator(stream))
        assert torch.equal(first, _draws(_cell(seed, secret).noise_generator(stream)))
        assert torch.equal(_draws(_cell(seed).generator(stream)),
                           _draws(_cell(seed, secret).generator(stream)))  # the secret is noise's


def test_without_a_secret_the_noise_stream_is_the_seeds_stream():
    for secret in (None, ""):
        cell = _cell(3, secret)
        assert torch.equal(_draws(cell.noise_generator("up")), _draws(cell.generator("up")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_streams_are_on_the_cells_device_or_the_one_asked_for():
    for secret in (None, "s"):
        for cell, other in ((_cell(0, secret, "cuda"), "cpu"), (_cell(0, secret), "cuda")):
            for make in (cell.generator, cell.noise_generator):
                assert make("up").device.type == cell.device.type
                assert make("up", other).device.type == other
