"""Planted privacy bugs: patch a plug-in's real functions, one bug at a time, and check it is caught.

A :class:`PlantedBug` names a bug of the kind a contributor makes (one noise draw scaled down,
clipping removed, a threshold compared before its noise, a sampler's scale off by a constant,
counted units or steps off) and plants it by monkeypatching the plug-in's own code for the
duration of a ``with bug.planted():`` block: nothing is copied or re-implemented, so the audit
sees exactly the code a spec runs, with one thing wrong. Helpers build the usual patches:

* :func:`scale_draws` — scale what one call site's noise sampler returns (``torch.randn`` called
  on a source line mentioning ``site``, in the module ``module``), e.g. ×¼ or ×0;
* :func:`scale_result` — scale what a function returns (a sampler helper, a noise multiplier);
* :func:`replace` — swap a function for one built from the original (``lambda original: ...``).

The checks that must catch the bugs are in :mod:`dpkit.testing.battery`.
"""

from __future__ import annotations

import contextlib
import importlib
import linecache
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("noise scaled", "clipping removed", "threshold before noise", "sampler scale",
         "units or steps off", "noise reused", "sampling rate off", "partition broken")
"""The kinds of bug a battery plants (a bug's ``kind`` is one of them)."""


@dataclass(frozen=True)
class Patch:
    """Replace ``attribute`` of the object at ``owner`` ("pkg.mod" or "pkg.mod:Class") with
    ``make(original)`` while planted."""

    owner: str
    attribute: str
    make: Callable[[Any], Any]

    def resolve(self) -> Any:
        """The object whose attribute is patched."""
        module, _, path = self.owner.partition(":")
        obj = importlib.import_module(module)
        for part in filter(None, path.split(".")):
            obj = getattr(obj, part)
        return obj


@dataclass(frozen=True)
class PlantedBug:
    """One bug: a name, its kind, the defense or mechanism it sits in, and its patches."""

    name: str
    kind: str
    target: str
    patches: tuple[Patch, ...]
    note: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"bug kind must be one of {KINDS}, got {self.kind!r}")

    @contextlib.contextmanager
    def planted(self) -> Iterator[None]:
        """Apply every patch; restore the originals on exit, whatever happens inside."""
        undo: list[tuple[Any, str, Any]] = []
        try:
            for patch in self.patches:
                owner = patch.resolve()
                original = getattr(owner, patch.attribute)
                setattr(owner, patch.attribute, patch.make(original))
                undo.append((owner, patch.attribute, original))
            yield
        finally:
            for owner, attribute, original in reversed(undo):
                setattr(owner, attribute, original)


class _ScaledSampler:
    """A module proxy (for ``torch`` / ``numpy.random``) whose ``sampler`` is scaled at one site."""

    def __init__(self, wrapped: Any, sampler: str, factor: float, site: str, filename: str):
        self._wrapped, self._sampler, self._factor = wrapped, sampler, factor
        self._site, self._filename = site, filename
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._wrapped, name)
        if name != self._sampler:
            return value

        def sampler(*args, **kwargs):
            out = value(*args, **kwargs)
            caller = sys._getframe(1)
            if caller.f_code.co_filename == self._filename and self._at_site(caller.f_lineno):
                self.calls += 1
                return out * self._factor
            return out

        return sampler

    def _at_site(self, line: int) -> bool:
        text = "".join(linecache.getline(self._filename, n) for n in range(line - 2, line + 1))
        return self._site in text


def scale_draws(module: str, factor: float, *, site: str, library: str = "torch",
                sampler: str = "randn") -> Patch:
    """Patch: in ``module``, the draws of ``library.sampler`` called on a line (or the two
    before it) containing ``site`` are multiplied by ``factor`` (¼: noise cut to a quarter; 0:
    the comparison or release made before its noise)."""
    filename = importlib.import_module(module).__file__ or ""
    return Patch(module, library,
                 lambda original: _ScaledSampler(original, sampler, factor, site, filename))


def scale_result(owner: str, attribute: str, factor: float) -> Patch:
    """Patch: ``owner.attribute(...)`` returns its result times ``factor``."""
    def make(original):
        def scaled(*args, **kwargs):
            return original(*args, **kwargs) * factor
        return scaled
    return Patch(owner, attribute, make)


def replace(owner: str, attribute: str, make: Callable[[Any], Any]) -> Patch:
    """Patch: ``owner.attribute`` becomes ``make(original)``."""
    return Patch(owner, attribute, make)


@dataclass
class BugOutcome:
    """What the checks said about one planted bug."""

    bug: PlantedBug
    caught: bool
    caught_by: str
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0


def mutation_scores(outcomes: Sequence[BugOutcome]) -> dict[str, tuple[int, int]]:
    """(caught, planted) per target."""
    out: dict[str, tuple[int, int]] = {}
    for o in outcomes:
        caught, total = out.get(o.bug.target, (0, 0))
        out[o.bug.target] = (caught + o.caught, total + 1)
    return out
