"""Example dpkit plug-in: the Gaussian mechanism on clipped token embeddings ((ε, δ)-DP per token).

Copy this folder, rename the package and the entry point, replace the mechanism. The hook
registers the mechanism by reference, so dpkit imports :mod:`dpkit_example.mechanism` (and torch)
only when the mechanism is used; ``register(ClippedGaussian)`` with the class works too.
"""

import dpkit


@dpkit.hookimpl
def dpkit_register_mechanisms(register):
    """Register the clipped Gaussian mechanism."""
    register("dpkit_example.mechanism:ClippedGaussian", name="clipped_gaussian",
             params="dpkit_example.params:ClippedGaussianParams")
