"""Token-level baselines: Laplace dχ, NOISE (Text2Text), SanText(+), CusText(+)."""

import dpkit
from dpkit_baselines.custext import CusText, CusTextPlus
from dpkit_baselines.laplace import LaplaceDx, Text2Text
from dpkit_baselines.santext import SanText, SanTextPlus

MECHANISMS = (LaplaceDx, Text2Text, SanText, SanTextPlus, CusText, CusTextPlus)

__all__ = ["CusText", "CusTextPlus", "LaplaceDx", "SanText", "SanTextPlus", "Text2Text"]


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register the token-level baseline mechanisms."""
    for mechanism in MECHANISMS:
        register(mechanism)
