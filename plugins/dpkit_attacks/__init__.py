"""Built-in generic attacks every plug-in can use: inversion, token recovery, mutual information,
attributes."""

from dpkit import hookimpl
from dpkit_attacks.attribute import (
    AttributeInference,
    attribute_inference,
    mlp_predict,
    train_mlp_classifier,
)
from dpkit_attacks.information import (
    MutualInformation,
    kl_entropy,
    kl_mutual_information,
    knn_distances,
)
from dpkit_attacks.inversion import NNInversion, TokenRecovery, knn_recovery, substitute_recovery

ATTACKS = (NNInversion, TokenRecovery, MutualInformation, AttributeInference)

__all__ = [
    "AttributeInference",
    "MutualInformation",
    "NNInversion",
    "TokenRecovery",
    "attribute_inference",
    "kl_entropy",
    "kl_mutual_information",
    "knn_distances",
    "knn_recovery",
    "mlp_predict",
    "substitute_recovery",
    "train_mlp_classifier",
]


@hookimpl
def dpkit_register_attacks(register):
    """Register the generic attacks."""
    for attack in ATTACKS:
        register(attack)
