"""dχ-STENCIL and STENCIL: contextual token substitution (Gaussian windows over embeddings).

Registered by reference: building the registry imports only :mod:`dpkit_stencil.params`.
"""

import dpkit


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register STENCIL and dχ-STENCIL."""
    register(f"{__name__}.mechanisms:Stencil", name="stencil",
             params=f"{__name__}.params:StencilParams")
    register(f"{__name__}.mechanisms:DxStencil", name="dx_stencil",
             params=f"{__name__}.params:DxStencilParams")
