"""bfloat16 autocast that runs at speed on every machine, and a note where it is emulated.

bfloat16 autocast (``precision: bf16`` in HiddenEcho's and ObfusLM's params) speeds up a GPU and
a CPU with native bf16 instructions (x86's AVX512-BF16 or AMX, Arm's BF16). A CPU without them
falls back to scalar bf16 products: on an AVX2-only AMD EPYC (2026-11-28) a 512 × 512 product
took 233 ms in bf16 against 7 ms in fp32. :func:`bf16_autocast` computes those products as fp32
products of bf16-rounded operands with a bf16-rounded result, which is what a native bf16 unit
computes (it accumulates in fp32), at fp32 speed.
"""

from __future__ import annotations

import contextlib
import functools
import platform
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""``/proc/cpuinfo`` flags (x86) and features (Arm) of a CPU that computes bfloat16 itself."""

ROUNDED_PRODUCTS = frozenset({
    F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
    torch.Tensor.__rmatmul__, torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm,
    torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm, torch.addbmm,
    torch.einsum, F.scaled_dot_product_attention, F.conv1d, F.conv2d, F.conv3d})
"""The products :class:`RoundedBf16Products` computes in fp32 on bf16-rounded operands."""


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags (x86) or features (Arm) of the first processor listed in ``cpuinfo``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool | None:
    """True or False where ``/proc/cpuinfo`` says; None where nothing says (another system)."""
    try:
        flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        return None
    return bool(flags & NATIVE_BF16_FLAGS) if flags else None


def bf16_is_emulated(device_type: str) -> bool:
    """True on a CPU that ``/proc/cpuinfo`` says lacks native bfloat16 products."""
    return device_type == "cpu" and cpu_has_native_bf16() is False


def _round(value):
    if isinstance(value, torch.Tensor) and value.dtype in (torch.float32, torch.bfloat16):
        return value.to(torch.bfloat16).float()
    if isinstance(value, (list, tuple)):
        return type(value)(_round(v) for v in value)
    return value


def _has_float64(values) -> bool:
    return any(isinstance(v, torch.Tensor) and v.dtype == torch.float64
               or isinstance(v, (list, tuple)) and _has_float64(v) for v in values)


class RoundedBf16Products(TorchFunctionMode):
    """Inside bfloat16 autocast on ``device_type``, compute each product in
    :data:`ROUNDED_PRODUCTS` in fp32 on bf16-rounded operands and round its result to bf16."""

    def __init__(self, device_type: str = "cpu") -> None:
        super().__init__()
        self.device_type = device_type

    def __torch_function__(self, func, types, args=(), kwargs=None):
        """Run ``func``, as a rounded fp32 product where autocast would run it in bf16."""
        kwargs = kwargs or {}
        if (func not in ROUNDED_PRODUCTS or not torch.is_autocast_enabled(self.device_type)
                or torch.get_autocast_dtype(self.device_type) != torch.bfloat16
                or _has_float64(args) or _has_float64(kwargs.values())):
            return func(*args, **kwargs)
        with torch.autocast(self.device_type, enabled=False):
            out = func(*_round(args), **{k: _round(v) for k, v in kwargs.items()})
        return out.to(torch.bfloat16) if out.is_floating_point() else out


@contextlib.contextmanager
def bf16_autocast(device_type: str, enabled: bool = True,
                  rounded: bool | None = None) -> Iterator[None]:
    """bfloat16 autocast on ``device_type`` (nothing where not ``enabled``); ``rounded`` (by
    default: on a CPU without native bf16) computes the products as :class:`RoundedBf16Products`."""
    if rounded is None:
        rounded = bf16_is_emulated(device_type)
    with torch.autocast(device_type, dtype=torch.bfloat16, enabled=enabled):
        if enabled and rounded:
            with RoundedBf16Products(device_type):
                yield
        else:
            yield


def warn_if_bf16_is_emulated(device_type: str, precision: str, who: str) -> bool:
    """Note (once per process and ``who``) that ``precision="bf16"`` on this CPU runs as rounded
    fp32 products (:func:`bf16_autocast`); True where it does."""
    if precision != "bf16" or not bf16_is_emulated(device_type):
        return False
    return _warn(who)


@functools.lru_cache(maxsize=None)
def _warn(who: str) -> bool:
    warnings.warn(
        f"{who}: precision 'bf16' on a CPU without native bfloat16 ({platform.machine()}: no "
        "AVX512-BF16, AMX or BF16 among its flags): dpkit computes its matrix products in fp32 on "
        "bf16-rounded operands and rounds each result to bf16 (what a native bf16 unit computes), "
        "at fp32 speed. Products match native bf16 to the last bit almost everywhere, attention "
        "to about 1e-3 relative; for bit-equal bf16 run it on a GPU (device: cuda)",
        RuntimeWarning, stacklevel=3)
    return True
