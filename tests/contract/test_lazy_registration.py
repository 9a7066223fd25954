"""Components registered by reference: only their Params load with the registry; the class loads
on first use and must match its registration (name, Params, declared capabilities), or the
plug-in that registered it is named in a PluginError."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types

import pytest

from dpkit.base.errors import PluginError
from dpkit.contract.plugins import PluginSystem

PARAMS = """
import dpkit
class AcmeParams(dpkit.Params):
    eta: float = 1.0
class OtherParams(dpkit.Params):
    eta: float = 1.0
"""

MECHANISMS = """
import sys
import dpkit
from acme_pkg.params import AcmeParams, OtherParams
sys.modules[__name__].IMPORTED = True
class Acme(dpkit.Component):
    name = "acme"
    domain = "embedding"
    Params = AcmeParams
    def guarantee(self, space=None):
        return dpkit.MetricDpGuarantee(self.params.eta)
    def privatize(self, x, *, space=None, generator):
        return x
class Misnamed(Acme):
    name = "not_acme"
class OtherParamsMech(Acme):
    Params = OtherParams
class Task(dpkit.Component):
    name = "acme_task"
    runs_mechanisms = True
    Params = AcmeParams
    def run(self, ctx):
        raise NotImplementedError
"""


@pytest.fixture
def acme(tmp_path, monkeypatch):
    package = tmp_path / "acme_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "params.py").write_text(PARAMS)
    (package / "mechanisms.py").write_text(MECHANISMS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "acme_pkg"
    for name in [m for m in sys.modules if m.startswith("acme_pkg")]:
        del sys.modules[name]


def plugin(kind_hook: str, *registrations: tuple[tuple, dict]) -> types.SimpleNamespace:
    """A plug-in object whose one hook makes the given register(*args, **kwargs) calls."""
    import dpkit

    @dpkit.hookimpl(specname=kind_hook)
    def hook(register):
        for args, kwargs in registrations:
            register(*args, **kwargs)
    return types.SimpleNamespace(hook=hook)


def registry_of(*plugins_: tuple[str, object]):
    """The registry (and plug-in system) built from the given (name, plug-in) pairs."""
    system = PluginSystem()
    for name, obj in plugins_:
        system.add(obj, name)
    return system.registry, system


def mech(target="acme_pkg.mechanisms:Acme", name="acme", params="acme_pkg.params:AcmeParams",
         **extra):
    return ((target,), {"name": name, "params": params, **extra})


def test_the_registry_loads_only_the_params(acme):
    registry, _ = registry_of(("acme", plugin("dpkit_register_mechanisms", mech())))
    entry = registry.get("mechanism", "acme")
    assert "acme_pkg.params" in sys.modules and "acme_pkg.mechanisms" not in sys.modules
    assert entry.params.__name__ == "AcmeParams" and not entry.loaded
    built = registry.build("mechanism", "acme", {"eta": 2.0})
    assert sys.modules["acme_pkg.mechanisms"].IMPORTED and built.params.eta == 2.0


@pytest.mark.parametrize("registration, said", [
    (mech(target="acme_pkg.mechanisms:Misnamed"), "the class's name is 'not_acme'"),
    (mech(target="acme_pkg.mechanisms:OtherParamsMech"), "its Params is acme_pkg.params.OtherParams"),
    (mech(target="acme_pkg.mechanisms:Missing"), "cannot be imported"),
    (mech(target="acme_pkg.nowhere:Acme"), "cannot be imported"),
])
def test_a_class_unlike_its_registration_is_a_plugin_error_naming_the_plugin(acme, registration,
                                                                              said):
    registry, _ = registry_of(("acme", plugin("dpkit_register_mechanisms", registration)))
    with pytest.raises(PluginError, match="plug-in 'acme'") as info:
        registry.build("mechanism", "acme", {})
    assert said in str(info.value)


@pytest.mark.parametrize("registration, said", [
    (mech(target="acme_pkg.mechanisms.Acme"), "'package.module:ClassName'"),
    (mech(name=None), "needs name="),
    (mech(params="acme_pkg.params:Nope"), "cannot be imported"),
    (mech(params="acme_pkg.params:AcmeParams", capabilities=("flies",)), "unknown capabilities"),
])
def test_a_bad_registration_breaks_only_its_plugin(acme, registration, said):
    good = plugin("dpkit_register_mechanisms", mech(name="acme_ok"))
    bad = plugin("dpkit_register_mechanisms", registration)
    with pytest.warns(UserWarning, match="'bad' is broken"):
        registry, system = registry_of(("good", good), ("bad", bad))
    assert any(said in e for e in system.info["bad"].errors), system.info["bad"].errors
    assert "acme_ok" in registry.names("mechanism")


def test_a_class_given_with_reference_options_is_refused(acme):
    from acme_pkg.mechanisms import Acme

    with pytest.warns(UserWarning, match="for a lazy registration"):
        registry, _ = registry_of(("acme", plugin("dpkit_register_mechanisms",
                                                  ((Acme,), {"name": "acme"}))))
    assert registry.names("mechanism") == []


def test_declared_capabilities_must_match_the_class(acme):
    task = (("acme_pkg.mechanisms:Task",), {"name": "acme_task",
                                            "params": "acme_pkg.params:AcmeParams"})
    registry, _ = registry_of(("acme", plugin("dpkit_register_defenses", task)))
    assert registry.providers("defense", "runs_mechanisms") == []  # not declared: not found
    with pytest.raises(PluginError, match="declares none"):
        _ = registry.get("defense", "acme_task").cls
    declared = (task[0], {**task[1], "capabilities": ("runs_mechanisms",)})
    registry, _ = registry_of(("acme", plugin("dpkit_register_defenses", declared)))
    assert [e.name for e in registry.providers("defense", "runs_mechanisms")] == ["acme_task"]
    assert registry.get("defense", "acme_task").cls.runs_mechanisms is True


def test_two_plugins_claiming_one_name_is_refused(acme):
    with pytest.warns(UserWarning, match="already provided by plug-in 'first'"):
        registry, _ = registry_of(("first", plugin("dpkit_register_mechanisms", mech())),
                                  ("second", plugin("dpkit_register_mechanisms",
                                                    mech(target="acme_pkg.mechanisms:Misnamed"))))
    assert registry.get("mechanism", "acme").plugin == "first"


def test_validate_reads_params_and_guarantees_without_torch():
    """`dpkit validate` of a mechanism spec imports no torch and no dp-accounting."""
    code = textwrap.dedent("""
        import sys
        from dpkit.cli.main import main
        status = main(["validate", "specs/quick.yaml"])
        heavy = [m for m in ("torch", "dp_accounting", "sklearn", "scipy") if m in sys.modules]
        print(status, heavy)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr


def test_the_built_in_registry_and_every_params_model_load_without_torch():
    """Every built-in plug-in registers by reference: the registry, with every component's
    Params, builds from the plug-ins' __init__ and params modules alone (no torch, no
    dp-accounting, no component module)."""
    code = textwrap.dedent("""
        import sys
        from dpkit.contract.plugins import get_registry
        registry = get_registry()
        models = [e.params for es in registry.entries.values() for e in es.values()]
        heavy = [m for m in ("torch", "dp_accounting", "sklearn", "scipy") if m in sys.modules]
        loaded = sorted(m for m in sys.modules if m.startswith("dpkit_")
                        and m.split(".")[-1] not in ("params", "window") and "." in m)
        print(len(models), heavy, loaded, registry.errors)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, rest = out.stdout.strip().split(" ", 1)
    assert int(count) >= 55 and rest == "[] [] {}", out.stdout
