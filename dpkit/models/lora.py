"""LoRA adapters through peft, shared by the plug-ins that fine-tune a model (HiddenEcho, ObfusLM)."""

from __future__ import annotations

import warnings

from torch import nn


def with_lora(model: nn.Module, config) -> nn.Module:
    """``peft.get_peft_model(model, config)`` without peft's deprecation noise from transformers.

    peft (0.21) calls ``is_gradient_checkpointing``, which transformers 5 marks deprecated; the
    warning is about peft's code, not the caller's, so it is silenced here and nowhere else.
    """
    import peft

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                category=FutureWarning)
        return peft.get_peft_model(model, config)
