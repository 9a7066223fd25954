"""Built-in generic attacks every plug-in can use: inversion, token recovery, mutual information,
attributes.

Registered by reference: building the registry imports only :mod:`dpkit_attacks.params`.
"""

import dpkit

ATTACKS = {
    "nn_inversion": ("inversion:NNInversion", "KnnParams"),
    "token_recovery": ("inversion:TokenRecovery", "KnnParams"),
    "mutual_information": ("information:MutualInformation", "MutualInformationParams"),
    "attribute_inference": ("attribute:AttributeInference", "AttributeInferenceParams"),
}
"""Attack name -> (module:Class in this package, its Params in dpkit_attacks.params)."""


@dpkit.hookimpl
def dpkit_register_attacks(register):
    """Register the generic attacks."""
    for name, (target, params) in ATTACKS.items():
        register(f"{__name__}.{target}", name=name, params=f"{__name__}.params:{params}")
