"""dχ-STENCIL and STENCIL: contextual token substitution (Gaussian windows over embeddings)."""

import dpkit
from dpkit_stencil.mechanisms import DxStencil, Stencil
from dpkit_stencil.window import max_contribution, window_matrix, window_mix, window_offsets

__all__ = ["DxStencil", "Stencil", "max_contribution", "window_matrix", "window_mix",
           "window_offsets"]


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register STENCIL and dχ-STENCIL."""
    register(Stencil)
    register(DxStencil)
