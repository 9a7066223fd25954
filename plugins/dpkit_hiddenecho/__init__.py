"""HiddenEcho (split LLM fine-tuning with client-side hidden-state correction) and its baselines.

Registered by reference: building the registry imports only :mod:`dpkit_hiddenecho.params`; the
defenses (:mod:`dpkit_hiddenecho.defense`) and their canary audit load on first use.
"""

import dpkit

DEFENSES = {
    "hiddenecho": ("HiddenEcho", "HiddenEchoParams"),
    "hiddenecho_full": ("HiddenEchoFull", "HiddenEchoFullParams"),
    "hiddenecho_ldp": ("HiddenEchoLdp", "LdpParams"),
}
"""Defense name -> (class in dpkit_hiddenecho.defense, its Params in dpkit_hiddenecho.params)."""


@dpkit.hookimpl
def dpkit_register_defenses(register):
    """Register HiddenEcho, HiddenEcho-Full and the LDP baseline."""
    for name, (cls, params) in DEFENSES.items():
        register(f"{__name__}.defense:{cls}", name=name, params=f"{__name__}.params:{params}")


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of HiddenEcho and its variants (imported on first use)."""
    for name in DEFENSES:
        register(name, f"{__name__}.audit:HiddenEchoCanaryAudit")
