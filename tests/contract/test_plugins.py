"""Plug-in system: discovery, env filters, broken plug-ins named, registry errors."""

from __future__ import annotations

import types

import pytest

import dpkit
import dpkit.contract.plugins
from dpkit.base.errors import ComponentNotFoundError
from dpkit.contract.plugins import PluginSystem


def make_module(name, **hooks):
    mod = types.ModuleType(name)
    for key, fn in hooks.items():
        setattr(mod, key, dpkit.hookimpl(fn))
    return mod


class Good:
    """A fine mechanism."""

    name = "good_mech"
    domain = "embedding"

    class Params(dpkit.Params):
        eta: float = 1.0

    def __init__(self, params):
        self.params = params

    def guarantee(self, space=None):
        from dpkit.accounting import MetricDpGuarantee

        return MetricDpGuarantee(self.params.eta)

    def privatize(self, x, *, space=None, generator=None):
        return x


class NoParams:
    name = "bad_mech"
    domain = "embedding"

    def guarantee(self, space=None): ...

    def privatize(self, x, *, space=None, generator=None): ...


def test_good_plugin_registers():
    system = PluginSystem()
    system.add(make_module("m", dpkit_register_mechanisms=lambda register: register(Good)), "m")
    assert system.registry.get("mechanism", "good_mech").plugin == "m"


def test_invalid_component_is_reported_and_others_survive():
    system = PluginSystem()
    system.add(make_module("bad", dpkit_register_mechanisms=lambda register: register(NoParams)),
               "bad")
    system.add(make_module("m", dpkit_register_mechanisms=lambda register: register(Good)), "m")
    with pytest.warns(UserWarning, match="'bad' is broken"):
        reg = system.registry
    assert "good_mech" in reg.names("mechanism")
    assert "Params" in reg.errors["bad"][0]


def test_raising_hook_is_reported():
    def boom(register):
        raise RuntimeError("kaboom")

    system = PluginSystem()
    system.add(make_module("boom", dpkit_register_attacks=boom), "boom")
    with pytest.warns(UserWarning):
        assert "kaboom" in system.registry.errors["boom"][0]


def test_unknown_hook_name_is_an_error():
    mod = types.ModuleType("typo")
    mod.dpkit_register_mechanism = dpkit.hookimpl(lambda register: None)
    system = PluginSystem()
    system.add(mod, "typo")
    assert "did you mean 'dpkit_register_mechanisms'" in system.info["typo"].errors[0]


def test_did_you_mean():
    system = PluginSystem()
    system.add(make_module("m", dpkit_register_mechanisms=lambda register: register(Good)), "m")
    with pytest.raises(ComponentNotFoundError, match="did you mean 'good_mech'"):
        system.registry.get("mechanism", "good_mec")


def test_env_filters(monkeypatch):
    monkeypatch.setenv("DPKIT_LOAD_PLUGINS", "")
    monkeypatch.setenv("DPKIT_EXTRA_PLUGINS", "toy=dpkit.testing.toy,ghost=no.such.module")
    dpkit.contract.plugins.reset()
    try:
        system = dpkit.contract.plugins.get_plugin_system()
        assert set(system.info) == {"toy", "ghost"}
        with pytest.warns(UserWarning, match="ghost"):
            assert "toy_noise" in system.registry.names("defense")
        assert "No module named" in dpkit.contract.plugins.plugin_errors()["ghost"][0]
    finally:
        dpkit.contract.plugins.reset()


def test_disabled_plugins(monkeypatch):
    monkeypatch.delenv("DPKIT_LOAD_PLUGINS", raising=False)
    monkeypatch.setenv("DPKIT_DISABLED_PLUGINS", "baselines,stencil")
    dpkit.contract.plugins.reset()
    try:
        assert not {"baselines", "stencil"} & set(dpkit.contract.plugins.get_plugin_system().info)
    finally:
        dpkit.contract.plugins.reset()


def test_only_marked_functions_are_hooks():
    """A helper that merely starts with ``dpkit_`` is no hook and breaks nothing."""
    mod = make_module("m", dpkit_register_mechanisms=lambda register: register(Good))
    mod.dpkit_helper_not_a_hook = lambda: None
    mod.dpkit_register_mechanism = lambda register: None  # unmarked: ignored, like pytest does
    system = PluginSystem()
    system.add(mod, "m")
    assert not system.info["m"].errors
    assert "good_mech" in system.registry.names("mechanism")


def test_hookimpl_with_wrong_arguments_is_reported_in_one_line():
    system = PluginSystem()
    system.add(make_module("bad", dpkit_register_mechanisms=lambda reg: None), "bad")
    (error,) = system.info["bad"].errors
    assert "'reg'" in error and "\n" not in error
    assert system.pm.get_plugin("bad") is None


def test_registry_rebuild_does_not_repeat_errors(recwarn):
    def boom(register):
        raise RuntimeError("kaboom")

    system = PluginSystem()
    system.add(make_module("boom", dpkit_register_attacks=boom), "boom")
    system.add(make_module("bad", dpkit_register_mechanisms=lambda register: register(NoParams)),
               "bad")
    for extra in ("m1", "m2", "m3"):  # every add invalidates the registry: three rebuilds
        assert system.registry.errors  # builds the registry
        system.add(make_module(extra, dpkit_register_mechanisms=lambda register: None), extra)
    registry = system.registry
    assert len(registry.errors["boom"]) == 1 and len(system.info["boom"].errors) == 1
    assert len(registry.errors["bad"]) == 1
    broken = [w for w in recwarn.list if "is broken" in str(w.message)]
    assert len(broken) == 2, [str(w.message) for w in broken]
