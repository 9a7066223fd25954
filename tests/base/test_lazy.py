"""Lazy names: a module proxy that imports on first use, and PEP 562 package exports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dpkit.base.lazy import LazyModule, export_lazily, lazy_import


def test_the_proxy_imports_only_on_first_attribute_access():
    code = ("import sys\nfrom dpkit.base.lazy import lazy_import\nfractions = lazy_import('fractions')\n"
            "before = 'fractions' in sys.modules\nhalf = fractions.Fraction(1, 2)\n"
            "print(before, 'fractions' in sys.modules, half, repr(fractions))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False True 1/2 <lazy module 'fractions' (imported)>"


def test_the_proxy_forwards_reads_and_writes_to_the_module():
    import json

    proxy = lazy_import("json")
    assert proxy.dumps is json.dumps and "loads" in dir(proxy)
    proxy.dpkit_probe = 7
    try:
        assert json.dpkit_probe == 7
    finally:
        del json.dpkit_probe


def test_a_missing_module_fails_at_first_use_not_at_import():
    proxy = lazy_import("no_such_module_dpkit")
    assert isinstance(proxy, LazyModule)
    with pytest.raises(ModuleNotFoundError):
        _ = proxy.anything


def test_exports_resolve_names_and_submodules_and_refuse_the_rest():
    namespace: dict = {}
    getattr_ = export_lazily("pkg", {"dumps": "json", "decoder": "json.decoder"}, namespace)
    import json
    import json.decoder

    assert getattr_("dumps") is json.dumps and namespace["dumps"] is json.dumps
    assert getattr_("decoder") is json.decoder
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")
