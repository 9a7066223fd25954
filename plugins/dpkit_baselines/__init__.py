"""Token-level baselines: Laplace dχ, NOISE (Text2Text), SanText(+), CusText(+).

Registered by reference: building the registry imports only :mod:`dpkit_baselines.params`; a
mechanism's module is imported when the mechanism is first built.
"""

import dpkit

MECHANISMS = {
    "laplace_dx": ("laplace:LaplaceDx", "LaplaceDxParams"),
    "text2text": ("laplace:Text2Text", "Text2TextParams"),
    "santext": ("santext:SanText", "SanTextParams"),
    "santext_plus": ("santext:SanTextPlus", "SanTextPlusParams"),
    "custext": ("custext:CusText", "CusTextParams"),
    "custext_plus": ("custext:CusTextPlus", "CusTextParams"),
}
"""Mechanism name -> (module:Class in this package, its Params in dpkit_baselines.params)."""


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register the token-level baseline mechanisms."""
    for name, (target, params) in MECHANISMS.items():
        register(f"{__name__}.{target}", name=name, params=f"{__name__}.params:{params}")
