"""SnD (Split-N-Denoise, Mai et al. 2024) as a dpkit plug-in: the defense and its baselines."""

import dpkit
from dpkit_snd.defenses import (
    DEFENSES,
    ServerDenoise,
    SnD,
    SnDClean,
    SnDText2Text,
    TokEmbPriv,
)
from dpkit_snd.denoiser import DenoiserConfig, ServerTokenDenoiser, SnDDenoiser

__all__ = [
    "DenoiserConfig",
    "ServerDenoise",
    "ServerTokenDenoiser",
    "SnD",
    "SnDClean",
    "SnDDenoiser",
    "SnDText2Text",
    "TokEmbPriv",
]


@dpkit.hookimpl
def dpkit_register_defenses(register) -> None:
    """Register snd, tokembpriv, snd_text2text, snd_server_denoise and snd_clean."""
    for cls in DEFENSES:
        register(cls)


@dpkit.hookimpl
def dpkit_register_defense_audits(register):
    """Register the canary audits of SnD and its baselines (imported only when the registry is built)."""
    from dpkit_snd.audit import AUDITS

    for name, adapter in AUDITS.items():
        register(name, adapter)
