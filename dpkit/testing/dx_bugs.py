"""Planted bugs in the dχ sampler of a registered embedding mechanism, for any defense using it.

A defense that perturbs embeddings with a registered dχ mechanism (one that draws through
:func:`dpkit.sample_laplace_noise` and takes its ``eta`` from its params) plants these bugs in
*that* mechanism's module, found through the registry — never by importing another plug-in.
"""

from __future__ import annotations

import copy
from typing import Any

from dpkit.testing.planted import PlantedBug, replace, scale_result

SAMPLER = "sample_laplace_noise"
"""The name a dχ mechanism module imports the framework's sampler under (``from dpkit import``)."""


def eta_times(factor: float) -> Any:
    """Patch maker: ``privatize`` draws at factor·η while the guarantee still declares η."""
    def make(original: Any) -> Any:
        def privatize(self: Any, x: Any, **kwargs: Any) -> Any:
            twin = copy.copy(self)
            twin.params = self.params.model_copy(update={"eta": self.params.eta * factor})
            return original(twin, x, **kwargs)
        return privatize
    return make


def dx_mechanism_module(mechanism: str, registry: Any = None) -> str:
    """The module of registered mechanism ``mechanism`` (where its sampler is imported), found
    through the registry: the target of a planted patch, without importing that plug-in."""
    return _owner(mechanism, registry).partition(":")[0]


def _owner(mechanism: str, registry: Any) -> str:
    if registry is None:
        from dpkit.testing.params_contract import process_registry

        registry = process_registry()
    return str(registry.get("mechanism", mechanism).target)  # "package.module:Class"


def dx_noise_reuse_bugs(target: str, mechanism: str, registry: Any = None) -> list[PlantedBug]:
    """Noise-stream bugs in registered mechanism ``mechanism``'s sampler, planted for ``target``:
    the first draw reused by every later call, and the generator re-seeded before each draw."""
    from dpkit.testing.noise_bugs import reseeded_each_draw, reused_across_calls

    module = dx_mechanism_module(mechanism, registry)
    return [
        PlantedBug("noise reused across calls", "noise reused", target,
                   (reused_across_calls(module, SAMPLER),)),
        PlantedBug("generator re-seeded to 0 before each draw", "noise reused", target,
                   (reseeded_each_draw(module, SAMPLER),)),
    ]


def dx_sampler_bugs(target: str, mechanism: str, registry: Any = None) -> list[PlantedBug]:
    """The dχ-sampler bugs of registered mechanism ``mechanism``, planted for ``target`` (a defense
    or the mechanism itself): noise ×¼, noise ×0, and a sampler drawing at 4η while declaring η."""
    owner = _owner(mechanism, registry)
    module = owner.partition(":")[0]
    return [
        PlantedBug("token noise ×¼", "noise scaled", target,
                   (scale_result(module, SAMPLER, 0.25),)),
        PlantedBug("upload sent before its noise (noise ×0)", "threshold before noise", target,
                   (scale_result(module, SAMPLER, 0.0),)),
        PlantedBug("sampler draws at 4η, declares η", "sampler scale", target,
                   (replace(owner, "privatize", eta_times(4.0)),)),
    ]
