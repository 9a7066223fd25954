"""Plug-ins that try to put the raw, noise-free token embeddings where the attacks can see them.

Each ``leak_*`` defense sends the toy plug-in's honest Gaussian-noised embeddings (a finite ledger
entry) and then tries one way around the boundary. The ``leak_probe`` attack runs where the server
is and reports what fraction of the rows it can find — in the server's view, in its knowledge, or
anywhere in the server process's memory — that are exact copies of the private sequence of
vocabulary vectors. The property the boundary suite checks (``tests/boundary``): every such
attempt either fails with a clear error, or ends with ε = ∞ on the ledger, or the probe finds no
raw row. Load with ``DPKIT_EXTRA_PLUGINS=toy=dpkit.testing.toy,leaks=dpkit.testing.adversaries``.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any, ClassVar

import torch

from dpkit.accounting import Ledger
from dpkit.contract.hookspecs import hookimpl
from dpkit.contract.params import Params
from dpkit.contract.protocols import DefenseResult
from dpkit.contract.server import Message, Server, handles
from dpkit.release.codec import encode
from dpkit.release.declaration import Release
from dpkit.release.view import ServerView
from dpkit.release.wire import Wire
from dpkit.testing.toy import ToyNoise

_STASH: dict[str, Any] = {}
"""A module global the client writes and a server reads (a different process: still empty)."""
_SERVER_STASH: list[torch.Tensor] = []
"""A module global servers write and later cells' servers read (a fresh process: still empty)."""


def _raw_and_noisy(ctx: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token ids, their raw embeddings, the honest noisy embeddings) of the test split."""
    space = ctx.model
    ids = torch.cat(space.encode(ctx.dataset["test"].texts)).to(ctx.device)
    raw = space.vectors[ids].clone()
    noise = torch.randn(raw.shape, generator=ctx.noise_generator("noise"), device=ctx.device)
    return ids, raw, raw + noise / 1.0


class _Leak(ToyNoise):
    """Declares and sends the honest release; subclasses add one attempt in :meth:`leak`."""

    name: ClassVar[str] = "leak_base"

    def run(self, ctx: Any) -> DefenseResult:
        """Send the honest noisy rows, then try the leak."""
        from dpkit.contract.releases import declare_releases

        declare_releases(self, ctx)
        ids, raw, noisy = _raw_and_noisy(ctx)
        ctx.wire.send("embeddings", self.honest_message(noisy))
        self.leak(ctx, raw, noisy)
        return DefenseResult({"sent": float(len(ids))}, truth={"token_ids": ids, "raw": raw})

    def honest_message(self, noisy: torch.Tensor) -> torch.Tensor:
        """How the honest rows are sent (as they are, ``[n, d]``)."""
        return noisy

    def leak(self, ctx: Any, raw: torch.Tensor, noisy: torch.Tensor) -> None:
        """The attempt (nothing, in the honest base)."""


class LeakAlias(_Leak):
    """Reuses the send buffer: after sending, overwrites it with the raw rows."""

    name = "leak_alias"

    def run(self, ctx: Any) -> DefenseResult:
        """Send a buffer, then change it in place."""
        from dpkit.contract.releases import declare_releases

        declare_releases(self, ctx)
        ids, raw, noisy = _raw_and_noisy(ctx)
        buffer = noisy.clone()
        ctx.wire.send("embeddings", buffer)
        buffer.copy_(raw)
        ctx.wire.send("probe_request")  # the server's handler looks at what it holds now
        return DefenseResult({"sent": float(len(ids))}, truth={"token_ids": ids, "raw": raw})


class LeakCountZero(_Leak):
    """Declares a second release with count 0 that ``covers`` every row, and sends the raw rows."""

    name = "leak_count_zero"

    def releases(self, ctx: Any) -> list[Release]:
        """The honest release plus a free one."""
        honest = super().releases(ctx)
        return [*honest, Release("hidden_states", honest[0].guarantee, "free", count=0,
                                 covers=10**6)]

    def leak(self, ctx, raw, noisy):
        """Send the raw rows under the free release (a standard name, which every server takes)."""
        ctx.wire.send("hidden_states", raw)


class LeakPadding(_Leak):
    """Hides the raw rows behind the noisy ones in a batch whose release declares padding."""

    name = "leak_padding"

    def releases(self, ctx: Any) -> list[Release]:
        """The honest release, declared with padding."""
        (honest,) = super().releases(ctx)
        return [Release(honest.name, honest.guarantee, honest.label, honest.count,
                              padding=0.0)]

    def run(self, ctx: Any) -> DefenseResult:
        """Send [noisy; raw] as one batch of two sequences."""
        from dpkit.contract.releases import declare_releases

        declare_releases(self, ctx)
        ids, raw, noisy = _raw_and_noisy(ctx)
        ctx.wire.send("embeddings", torch.stack([noisy, raw]))
        return DefenseResult({"sent": float(len(ids))}, truth={"token_ids": ids, "raw": raw})


class LeakCompanion(_Leak):
    """Sends the raw rows as a 'mask' next to the noisy ones, without declaring it."""

    name = "leak_companion"

    def leak(self, ctx, raw, noisy):
        """An undeclared companion."""
        ctx.wire.send("mask", raw)


class LeakRowsMask(_Leak):
    """Marks rows as padding with a caller-supplied mask (the wire takes no such argument)."""

    name = "leak_rows_mask"

    def leak(self, ctx, raw, noisy):
        """Try the old ``rows=`` keyword."""
        ctx.wire.send("embeddings", raw, rows=torch.zeros(len(raw), dtype=torch.bool))


class LeakReply(_Leak):
    """Puts client data into the server's answers (there is no client-side reply)."""

    name = "leak_reply"

    def leak(self, ctx, raw, noisy):
        """Try the old ``wire.reply``."""
        ctx.wire.reply("pooled", raw)


class LeakTruth(_Leak):
    """Hands the raw rows to the attacks through the result (truth and metrics stay here)."""

    name = "leak_truth"

    def run(self, ctx: Any) -> DefenseResult:
        """Put the raw rows in the truth."""
        result = super().run(ctx)
        result.truth["space"] = result.truth["embeddings"] = result.truth["raw"]
        result.metrics["raw_first"] = float(result.truth["raw"][0, 0])
        return result


class LeakGlobal(_Leak):
    """Writes the raw rows to a module global that its server reads."""

    name = "leak_global"

    def leak(self, ctx, raw, noisy):
        """Stash them, and mark the class too."""
        _STASH["raw"] = raw
        type(self).stashed = raw  # type: ignore[attr-defined]
        ctx.wire.send("probe_request")


class LeakSwapWire(_Leak):
    """Replaces the context's wire, then its ledger, with fresh ones."""

    name = "leak_swap_wire"

    def leak(self, ctx, raw, noisy):
        """Swap the wire (refused) and its ledger (refused)."""
        try:
            ctx.wire = Wire(Ledger())
        except AttributeError:
            ctx.wire.ledger = Ledger()


class LeakOwnWire(_Leak):
    """Builds its own wire, with its own ledger, on the cell's channel to the server."""

    name = "leak_own_wire"

    def leak(self, ctx, raw, noisy):
        """Send the raw rows through it."""
        Wire(Ledger(), connect=ctx.wire.channel).send("embeddings", raw)


class LeakRawPipe(_Leak):
    """Writes an encoded message straight to the channel, past the meter."""

    name = "leak_raw_pipe"

    def leak(self, ctx, raw, noisy):
        """A hand-made message."""
        ctx.wire.channel().request(encode({"op": "message", "name": "embeddings",
                                           "phase": "run", "batch": 0, "tensor": raw,
                                           "mask": None}))


class LeakPublicModel(_Leak):
    """Writes the raw rows into the client's copy of the public model, which its server reads."""

    name = "leak_public_model"

    def leak(self, ctx, raw, noisy):
        """Overwrite the public table with the private sequence (restored afterwards, so later
        cells of this process are not disturbed)."""
        table = ctx.model.vectors
        n = min(len(raw), len(table))
        saved = table[:n].clone()
        table[:n] = raw[:n]
        try:
            ctx.wire.send("probe_request")
        finally:
            table[:n] = saved


class LeakPrivateData(_Leak):
    """Its server asks for a superset of the cell's private dataset (other params, same records)
    as 'public' data."""

    name = "leak_private_data"


class LeakServerStash(_Leak):
    """Its server keeps what it received in a module global, for the servers of later cells
    (``sleep`` > 0 marks the cell that sends the raw rows, declared uncovered: ε = ∞ there)."""

    name = "leak_server_stash"

    def releases(self, ctx: Any) -> list[Release]:
        """Honest, or the raw rows declared as uncovered."""
        honest = super().releases(ctx)
        if self.params.sleep > 0:
            return [*honest, Release.uncovered("clean", "the raw rows, declared as such",
                                                     count=10**6)]
        return honest

    def leak(self, ctx, raw, noisy):
        """The first cell sends the raw rows (declared ∞); every cell then asks to probe."""
        if self.params.sleep > 0:
            ctx.wire.send("clean", raw)
        ctx.wire.send("probe_request")

class LeakNameChannel(_Leak):
    """Spells private data in the name of a request."""

    name = "leak_name"

    def leak(self, ctx, raw, noisy):
        """A request named after the first private text."""
        ctx.wire.send("text:" + ctx.dataset["test"].texts[0])


class LeakServer(Server):
    """The server of every leak: keeps what arrives, and looks for raw rows wherever it can."""

    def __init__(self, params: Any, public: Any):
        super().__init__(params, public)
        self.held: list[torch.Tensor] = []

    @handles("embeddings")
    def embeddings(self, message: Message) -> None:
        """Keep the rows, and the tensor object itself."""
        tensor = message.tensor
        assert tensor is not None
        self.held.append(tensor)
        self.observe("embeddings", tensor.reshape(-1, tensor.shape[-1]))

    @handles("clean")
    def clean(self, message: Message) -> None:
        """Keep the raw rows of an uncovered release, and stash them for later cells."""
        assert message.tensor is not None
        _SERVER_STASH.append(message.tensor)
        self.observe("clean", message.tensor)

    @handles("probe_request")
    def probe(self, message: Message) -> None:
        """Look again at everything it holds and at the globals a client may have written."""
        for tensor in self.held:
            self.observe("held", tensor.reshape(-1, tensor.shape[-1]))
        for stash in (_STASH.get("raw"), getattr(LeakGlobal, "stashed", None), *_SERVER_STASH):
            if stash is not None:
                self.observe("stash", stash)
        space = self.knowledge().get("space")
        if space is not None:
            self.observe("public_table", space.vectors.clone())


class PrivateDataServer(LeakServer):
    """Names a superset of the private toy corpus as its public data."""

    @classmethod
    def public_data(cls, params: Any) -> list[tuple[str, dict]]:
        """The toy corpus with twice the documents: the private ones are its first half."""
        return [("toy_text", {"n_docs": 48})]


LEAKS = (LeakAlias, LeakCountZero, LeakPadding, LeakCompanion, LeakRowsMask, LeakReply, LeakTruth,
         LeakGlobal, LeakSwapWire, LeakOwnWire, LeakRawPipe, LeakPublicModel, LeakPrivateData,
         LeakNameChannel, LeakServerStash)
for _cls in (_Leak, *LEAKS):
    _cls.server = LeakServer  # type: ignore[attr-defined]
LeakPrivateData.server = PrivateDataServer  # type: ignore[attr-defined]


class LeakProbe:
    """Runs where the server is: the share of the private token sequence found as raw vectors."""

    name = "leak_probe"
    requires: ClassVar[tuple[str, ...]] = ()

    class Params(Params):
        """No parameters."""

    def __init__(self, params: Any):
        self.params = params

    def run(self, view: ServerView, ctx: Any) -> dict[str, Any]:
        """Every [n, d] tensor in the view, the knowledge and the process's memory, except the
        public table itself."""
        space = view.knowledge.get("space")
        table = space.vectors.float().cpu() if space is not None else None
        found: list[torch.Tensor] = []
        candidates = [*view.observed.values(), *view.knowledge.values()]
        with warnings.catch_warnings():  # isinstance on some of torch's lazy objects warns
            warnings.simplefilter("ignore")
            candidates += [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
        for value in candidates:
            if (isinstance(value, torch.Tensor) and table is not None and value.ndim == 2
                    and value.shape[1] == table.shape[1] and value.is_floating_point()
                    and not (value.shape == table.shape and torch.equal(value.float().cpu(),
                                                                         table))):
                found.append(value.detach().float().cpu())
        return {"candidates": found}

    def score(self, guesses: dict[str, Any], truth: dict) -> dict[str, float]:
        """``raw_found``: the largest share of the private sequence any candidate reproduces."""
        return {"raw_found": max((raw_share(c, truth) for c in guesses["candidates"]),
                                 default=0.0)}


def raw_share(candidate: torch.Tensor, truth: dict) -> float:
    """Share of the private sequence ``truth['raw']`` that ``candidate`` holds as consecutive rows
    (the best alignment): 1.0 when it holds the raw token embeddings in the text's order."""
    raw = truth.get("raw")
    if raw is None or not len(raw) or not len(candidate):
        return 0.0
    raw = torch.as_tensor(raw).float()
    exact = torch.cdist(candidate, raw[:1]).squeeze(1) < 1e-6  # where the sequence may start
    best = 0.0
    for start in torch.nonzero(exact).squeeze(1)[:64].tolist():
        window = candidate[start:start + len(raw)]
        same = (window - raw[:len(window)]).abs().amax(dim=1) < 1e-6
        best = max(best, float(same.sum()) / len(raw))
    return best


@hookimpl
def dpkit_register_defenses(register):
    """The leaking defenses."""
    for cls in LEAKS:
        register(cls)


@hookimpl
def dpkit_register_attacks(register):
    """The probe."""
    register(LeakProbe)
