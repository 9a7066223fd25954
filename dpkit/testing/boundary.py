"""Test helpers for the process boundary: what an in-process server kept, attacks run through it.

A context from :func:`dpkit.testing.params_contract.tiny_context` (``server="inprocess"``) runs the
defense's server in the test's own process, still exchanging bytes; these helpers read what that
server kept and run an attack where it is, as the runner does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def server_of(ctx: Any) -> Any:
    """The :class:`dpkit.Server` of ``ctx``'s cell (in-process servers only)."""
    channel = ctx.wire.channel()
    host = getattr(channel, "host", None)
    if host is None:
        raise TypeError("server_of reads an in-process server; build the context with "
                        "tiny_context(..., server='inprocess')")
    return host.server


def server_view(ctx: Any) -> dict[str, Any]:
    """What the server of ``ctx``'s cell keeps for the attacks."""
    return server_of(ctx).view()


def attack_metrics(ctx: Any, result: Any, name: str, params: dict | None = None,
                   seed: int = 0) -> dict[str, float]:
    """Run attack ``name`` where ``ctx``'s server is and score its guesses against
    ``result.truth``, as ``dpkit run`` does (``{}`` when the server kept nothing it needs)."""
    from dpkit.boundary.session import remote_attack
    from dpkit.release.codec import to_device

    out = remote_attack(ctx.wire.channel(), name, params or {}, seed)
    if "skipped" in out:
        return {}
    attack = ctx.registry.build("attack", name, params or {})
    scores = attack.score(out["guesses"], to_device(dict(result.truth), "cpu"))
    return {k: float(v) for k, v in scores.items()}


class RecordingChannel:
    """A stand-in server for unit tests of a wire: decodes each message it gets, notes whether
    the ledger was already ∞ at that moment, and answers ``answer`` (e.g.
    ``Wire(ledger, connect=lambda: channel)``); it takes the standard phases and ``phases``,
    requests to ``handlers``, and tensors under the standard release names, the handlers' and
    ``receives`` (the wire's first question, not kept in :attr:`got`)."""

    def __init__(self, ledger: Any, answer: Any = None, phases: tuple[str, ...] = (),
                 handlers: tuple[str, ...] = (), receives: tuple[str, ...] = ()):
        from dpkit.contract.server import STANDARD_PHASES, STANDARD_RELEASES

        self.ledger, self.answer = ledger, answer
        self.labels = {"phases": sorted({*STANDARD_PHASES, *phases}),
                       "handlers": sorted(handlers),
                       "releases": sorted({*STANDARD_RELEASES, *handlers, *receives})}
        self.got: list[Any] = []
        self.infinite_then: list[bool] = []

    def request(self, data: bytes) -> bytes:
        """Decode and keep ``data``; answer with :attr:`answer`."""
        from dpkit.release.codec import decode, encode

        request = decode(data)
        if request.get("op") == "labels":
            return encode(self.labels)
        self.got.append(request)
        self.infinite_then.append(bool(self.ledger.no_guarantee_reasons))
        return encode(self.answer)

    def close(self) -> None:
        """Nothing to stop."""


def recording_wire(*releases: Any, ledger: Any = None, answer: Any = None,
                   phases: tuple[str, ...] = (), handlers: tuple[str, ...] = (),
                   receives: tuple[str, ...] | None = None) -> tuple[Any, Any]:
    """A wire over a :class:`RecordingChannel` taking ``phases``, requests to ``handlers`` and
    tensors under ``receives`` (default: the names of ``releases``), with ``releases`` declared:
    ``(wire, channel)``."""
    from dpkit.accounting import Ledger
    from dpkit.release.wire import Wire

    ledger = ledger if ledger is not None else Ledger()
    if receives is None:
        receives = tuple(release.name for release in releases)
    channel = RecordingChannel(ledger, answer, phases, handlers, receives)
    wire = Wire(ledger, connect=lambda: channel)
    wire.declare(releases)
    return wire, channel


def toy_rows(directory: Any, name: str, methods: list[str], params: str = "{}"
             ) -> dict[str, dict]:
    """Run a spec of ``methods`` on the toy data (the first with ``params``), attacked by
    ``leak_probe``, with its output under ``directory``; rows (or failures) by method."""
    first, *rest = methods
    baselines = "".join(f"\n  - {{name: {m}}}" for m in rest)
    path = directory / f"{name}.yaml"
    path.write_text(f"""name: {name}
data: {{name: toy_text}}
model: {{name: toy_space}}
defense: {{name: {first}, params: {params}}}
baselines:{baselines or " []"}
attacks: [{{name: leak_probe}}]
seeds: [0]
device: cpu
output: {directory / name}
""")
    return rows_by_method(path)


def rows_by_method(spec_path: Any) -> dict[str, dict]:
    """Run the spec at ``spec_path`` with the current plug-ins; each method's row as a dict, or
    ``{"error": ...}`` for a cell that failed."""
    from dpkit.contract.plugins import get_registry
    from dpkit.runner import run_spec
    from dpkit.spec import load_spec

    registry = get_registry()
    outcome = run_spec(load_spec(spec_path, registry=registry), show_progress=False,
                       registry=registry)
    rows = {row.method: row.to_dict() for row in outcome.rows}
    for cell, error in outcome.failures:
        rows[cell.method] = {"error": error}
    return rows


@contextmanager
def local_ray(plugins: str, **env: str) -> Iterator[Any]:
    """A local 2-CPU Ray whose workers load only ``plugins`` (``DPKIT_EXTRA_PLUGINS``'s form),
    with ``env`` set too; shut down, and the variables restored, afterwards."""
    import os

    import ray

    import dpkit.contract.plugins
    from dpkit.runner.ray_executor import RayExecutor

    values = {"DPKIT_LOAD_PLUGINS": "", "DPKIT_EXTRA_PLUGINS": plugins, **env}
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    dpkit.contract.plugins.reset()
    try:
        RayExecutor(num_cpus=2)._init()
        yield ray
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        dpkit.contract.plugins.reset()
