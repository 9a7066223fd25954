"""HiddenEcho (split LLM fine-tuning with client-side hidden-state correction) and its baselines."""

import dpkit
from dpkit_hiddenecho.defense import HiddenEcho, HiddenEchoFull, HiddenEchoLdp
from dpkit_hiddenecho.denoiser import GatedResidualDenoiser
from dpkit_hiddenecho.layer_filter import layer_contributions, select_layers
from dpkit_hiddenecho.mine import MineEstimator, donsker_varadhan

DEFENSES = (HiddenEcho, HiddenEchoFull, HiddenEchoLdp)

__all__ = ["GatedResidualDenoiser", "HiddenEcho", "HiddenEchoFull", "HiddenEchoLdp",
           "MineEstimator", "donsker_varadhan", "layer_contributions",
           "select_layers"]


@dpkit.hookimpl
def dpkit_register_defenses(register):
    """Register HiddenEcho, HiddenEcho-Full and the LDP baseline."""
    for defense in DEFENSES:
        register(defense)


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of HiddenEcho and its variants (imported only when the registry is built)."""
    from dpkit_hiddenecho.audit import AUDITS

    for name, adapter in AUDITS.items():
        register(name, adapter)
