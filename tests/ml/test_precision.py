"""The warning that a CPU without native bfloat16 runs ``precision: bf16`` many times slower."""

from __future__ import annotations

import warnings

import pytest

from dpkit.ml import precision

X86_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: avx512_bf16\n"
X86_AMX = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n"


def test_the_first_processors_flags_are_read():
    assert precision.cpu_flags(X86_AVX2) == {"fpu", "sse2", "avx", "avx2", "fma"}
    assert "bf16" in precision.cpu_flags(ARM_BF16)
    assert precision.cpu_flags("model name\t: something\n") == set()


@pytest.mark.parametrize("cpuinfo, native", [(X86_AVX2, False), (X86_AMX, True),
                                             (ARM_BF16, True), ("model name: x\n", None)])
def test_native_bf16_is_read_off_the_cpus_flags(cpuinfo, native, monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo)
    real = precision.Path

    monkeypatch.setattr(precision, "Path", lambda p: info if p == "/proc/cpuinfo" else real(p))
    precision.cpu_has_native_bf16.cache_clear()
    try:
        assert precision.cpu_has_native_bf16() is native
    finally:
        precision.cpu_has_native_bf16.cache_clear()


def test_no_cpuinfo_says_nothing(monkeypatch, tmp_path):
    real = precision.Path
    monkeypatch.setattr(precision, "Path",
                        lambda p: tmp_path / "absent" if p == "/proc/cpuinfo" else real(p))
    precision.cpu_has_native_bf16.cache_clear()
    try:
        assert precision.cpu_has_native_bf16() is None
    finally:
        precision.cpu_has_native_bf16.cache_clear()


@pytest.mark.parametrize("native", [False, True, None])
def test_only_bf16_on_an_emulating_cpu_warns_once_per_component(native, monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    precision._warn.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = precision.warn_if_bf16_is_emulated("cpu", "bf16", "hiddenecho")
        again = precision.warn_if_bf16_is_emulated("cpu", "bf16", "hiddenecho")
        other = [precision.warn_if_bf16_is_emulated("cpu", "fp32", "hiddenecho"),
                 precision.warn_if_bf16_is_emulated("cuda", "bf16", "hiddenecho")]
    precision._warn.cache_clear()
    assert other == [False, False]
    assert first is (native is False) and again is (native is False)
    messages = [str(w.message) for w in caught]
    if native is False:
        assert len(messages) == 1 and messages[0].startswith("hiddenecho: precision 'bf16'")
        assert "precision: fp32" in messages[0] and caught[0].category is RuntimeWarning
    else:
        assert messages == []
