"""What every contract suite shares: building a component from its params, a tiny run context.

Tests are an entry point like the command line: components named by a string are found in the
process registry (the installed plug-ins, :func:`process_registry`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch

from dpkit.base.errors import ParamsError


def process_registry() -> Any:
    """The registry of this process's plug-ins (entry points, DPKIT_EXTRA_PLUGINS), for tests."""
    from dpkit.contract.plugins import get_registry

    return get_registry()


def component_class(kind: str, component: Any) -> Any:
    """The class of ``component``: itself, or the registered class of that name."""
    if isinstance(component, str):
        return process_registry().get(kind, component).cls
    return component


def build_defense(defense: Any, params: dict | None = None) -> Any:
    """A defense (a registered name, a class or an instance) built with validated ``params``."""
    from dpkit.audit.defense import build_defense as build

    return build(defense, params, process_registry())


def build_component(kind: str, component: Any, params: dict) -> Any:
    """``component`` (a class or registered name) built with validated ``params``."""
    from dpkit.contract.registry import validate_params

    cls = component_class(kind, component)
    return cls(validate_params(cls, params))


class ParamsContract:
    """Shared checks: valid params accepted (and round-trip), each invalid set rejected."""

    kind: ClassVar[str] = ""
    params: ClassVar[dict] = {}
    invalid_params: ClassVar[list[dict]] = []

    def _component(self) -> Any:
        return getattr(self, self.kind)

    def test_params_round_trip(self):
        """Valid params validate, and their dump validates to the same params."""
        built = build_component(self.kind, self._component(), self.params)
        again = type(built.params).model_validate(built.params.model_dump())
        assert again == built.params

    def test_invalid_params_rejected(self):
        """Every entry of ``invalid_params`` raises ParamsError; unknown keys too."""
        for bad in [*self.invalid_params, {**self.params, "no_such_param_xyz": 1}]:
            with pytest.raises(ParamsError):
                build_component(self.kind, self._component(), bad)


def tiny_context(model: Any, dataset: Any, *, model_ref: dict | None = None,
                 server: str = "inprocess", registry: Any = None, seed: int = 0) -> Any:
    """A CPU RunContext with a fresh ledger and the process registry, for contract tests.

    ``model_ref`` (``{"name": ..., "params": ...}``) is how the server loads the public model by
    name; ``server`` is ``"inprocess"`` (the host in this process, bytes both ways: fast, and
    test-only plug-ins work) or ``"process"`` (its own process, as ``dpkit run`` does).
    """
    from dpkit.accounting import Ledger
    from dpkit.boundary.session import connector
    from dpkit.contract.context import RunContext

    registry = registry or process_registry()
    if model_ref is None and model is not None:
        model_ref = register_test_model(registry, model)
    return RunContext(dataset=dataset, model=model, device=torch.device("cpu"), seed=seed,
                      ledger=Ledger(), registry=registry, model_ref=model_ref,
                      connect=connector(server))


def register_test_model(registry: Any, model: Any) -> dict:
    """Register ``model`` (an object built in a test) as a model source of ``registry`` and
    return its reference, so an in-process server can load it by name like any public model."""
    import uuid

    from dpkit.contract.params import NoParams

    name = f"test-model-{uuid.uuid4().hex[:12]}"
    source = type("TestModel", (), {"name": name, "Params": NoParams,
                                    "__init__": lambda self, params: None,
                                    "load": lambda self, device: model,
                                    "__doc__": "A model object built by a test."})
    registry.add("model", source, "tests")
    return {"name": name, "params": {}}
