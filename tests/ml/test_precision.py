"""bfloat16 autocast with rounded fp32 products on a CPU without native bf16, and its note."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

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
        assert "fp32 on bf16-rounded operands" in messages[0]
        assert "device: cuda" in messages[0] and caught[0].category is RuntimeWarning
    else:
        assert messages == []


def _native_and_rounded(fn, *inputs):
    """``fn(*inputs)`` under torch's own bf16 autocast and under rounded products."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        native = fn(*inputs)
    with precision.bf16_autocast("cpu", rounded=True):
        rounded = fn(*inputs)
    return native, rounded


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@pytest.mark.parametrize("product", [
    lambda a, b, c: F.linear(a, b, c), lambda a, b, c: a @ b.T, lambda a, b, c: torch.mm(a, b.T),
    lambda a, b, c: torch.addmm(c, a, b.T), lambda a, b, c: torch.einsum("ij,kj->ik", a, b),
    lambda a, b, c: torch.bmm(a[None], b.T[None])[0], lambda a, b, c: a.matmul(b.T)])
def test_rounded_products_equal_native_bf16_to_the_last_bit_almost_everywhere(product):
    gen = torch.Generator().manual_seed(0)
    a, b, c = torch.randn(48, 96, generator=gen), torch.randn(64, 96, generator=gen), \
        torch.randn(64, generator=gen)
    native, rounded = _native_and_rounded(product, a, b, c)
    assert native.dtype == rounded.dtype == torch.bfloat16
    assert (native == rounded).float().mean() > 0.999
    assert _relative(rounded, native) < 1e-4 < _relative(product(a, b, c), native)


def test_a_transformer_under_rounded_products_is_nearer_native_bf16_than_fp32_is():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, vocab_size=50)).eval()
    x, mask = torch.randn(3, 12, 64), torch.ones(3, 12, dtype=torch.long)
    mask[0, 8:] = 0
    weights = torch.randn(3, 12, 64)

    def forward_and_grad(x):
        x = x.clone().requires_grad_()
        out = model(inputs_embeds=x, attention_mask=mask).last_hidden_state.float()
        (out * weights).sum().backward()
        return out.detach(), x.grad

    (native, native_grad), (rounded, rounded_grad) = _native_and_rounded(forward_and_grad, x)
    fp32, fp32_grad = forward_and_grad(x)
    assert _relative(rounded, native) < _relative(fp32, native)
    assert _relative(rounded_grad, native_grad) < _relative(fp32_grad, native_grad)
    assert _relative(rounded, native) < 5e-3


def test_products_outside_bf16_autocast_are_left_alone():
    a = torch.randn(8, 8)
    with precision.RoundedBf16Products("cpu"):
        assert torch.equal(a @ a, torch.mm(a, a)) and (a @ a).dtype == torch.float32
    with precision.bf16_autocast("cpu", rounded=True):
        with torch.autocast("cpu", enabled=False):
            assert (a @ a).dtype == torch.float32
        assert (a.double() @ a.double()).dtype == torch.float64
        assert (a.long() @ a.long()).dtype == torch.long
    with precision.bf16_autocast("cpu", enabled=False, rounded=True):
        assert torch.equal(a @ a, torch.mm(a, a))


@pytest.mark.parametrize("device_type, native, rounds", [
    ("cpu", False, True), ("cpu", True, False), ("cpu", None, False), ("cuda", False, False)])
def test_rounding_is_chosen_for_a_cpu_without_native_bf16_only(device_type, native, rounds,
                                                                monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)
    assert precision.bf16_is_emulated(device_type) is rounds
    entered = []
    monkeypatch.setattr(precision.RoundedBf16Products, "__enter__",
                        lambda self: entered.append(self.device_type) or self)
    monkeypatch.setattr(precision.RoundedBf16Products, "__exit__", lambda self, *exc: None)
    with precision.bf16_autocast(device_type, enabled=device_type == "cpu"):
        pass
    assert entered == (["cpu"] if rounds else [])
