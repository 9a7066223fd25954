"""SnD (Split-N-Denoise, Mai et al. 2024) as a dpkit plug-in: the defense and its baselines.

Registered by reference: building the registry imports only :mod:`dpkit_snd.params`; the
defenses (:mod:`dpkit_snd.defenses`) and their canary audit load on first use.
"""

import dpkit

DEFENSES = {
    "snd": ("SnD", "SnDParams"),
    "tokembpriv": ("TokEmbPriv", "TokEmbPrivParams"),
    "snd_text2text": ("SnDText2Text", "Text2TextParams"),
    "snd_server_denoise": ("ServerDenoise", "ServerDenoiseParams"),
    "snd_clean": ("SnDClean", "CommonParams"),
}
"""Defense name -> (class in dpkit_snd.defenses, its Params in dpkit_snd.params)."""

AUDITED = ("snd", "tokembpriv", "snd_server_denoise")
"""Defenses with a canary audit (dpkit_snd.audit.SndCanaryAudit)."""


@dpkit.hookimpl
def dpkit_register_defenses(register) -> None:
    """Register snd, tokembpriv, snd_text2text, snd_server_denoise and snd_clean."""
    for name, (cls, params) in DEFENSES.items():
        register(f"{__name__}.defenses:{cls}", name=name, params=f"{__name__}.params:{params}")


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of SnD and its baselines (imported on first use)."""
    for name in AUDITED:
        register(name, f"{__name__}.audit:SndCanaryAudit")
