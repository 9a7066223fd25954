"""The model body the server runs: its blocks, a private copy of it, LoRA adapters, block outputs."""

from __future__ import annotations

import copy

import torch
from torch import nn

from dpkit import with_lora


def transformer_blocks(model: nn.Module, num_layers: int) -> nn.ModuleList:
    """The model's list of transformer blocks: the largest ``ModuleList`` of ``num_layers`` items."""
    found = [m for m in model.modules() if isinstance(m, nn.ModuleList) and len(m) == num_layers]
    if not found:
        raise ValueError(f"no ModuleList of {num_layers} transformer blocks found in "
                         f"{type(model).__name__}; HiddenEcho needs a standard HF layer stack")
    return max(found, key=lambda m: sum(p.numel() for p in m.parameters()))


def private_copy(split_model):
    """A deep copy of a :class:`dpkit.models.SplitModel`, so fine-tuning never touches the cached one."""
    return copy.deepcopy(split_model)


def attach_lora(split_model, rank: int, alpha: float, dropout: float,
                targets: list[str] | None, top_layers: int | None = None) -> int:
    """Freeze the server body and wrap it with LoRA adapters (peft); returns trainable count.

    ``top_layers`` limits the adapters to the last n blocks (backward then stops there).
    """
    import peft

    split_model.server.requires_grad_(False)
    n = split_model.num_layers
    layers = None if top_layers is None else list(range(max(n - top_layers, 0), n))
    config = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout,
                             target_modules=targets or None, layers_to_transform=layers)
    try:
        split_model.server = with_lora(split_model.server, config)
    except ValueError as exc:
        raise ValueError(f"LoRA could not find its target modules in "
                         f"{type(split_model.server).__name__} ({exc}); set lora_targets to "
                         "the names of its attention projections, e.g. ['query', 'value']") from None
    return sum(p.numel() for p in split_model.server.parameters() if p.requires_grad)


def block_outputs(split_model, inputs_embeds: torch.Tensor,
                  attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Server forward from ``inputs_embeds``: the outputs of the L transformer blocks."""
    out = split_model.server_forward(inputs_embeds, attention_mask, output_hidden_states=True)
    return out.hidden_states[1:]


class ReplaceOutput:
    """A forward hook that swaps a block's output (or its first element) for a given tensor."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value

    def __call__(self, module: nn.Module, inputs, output):
        """Return ``output`` with its hidden state replaced by ``self.value``."""
        if isinstance(output, tuple):
            return (self.value, *output[1:])
        return self.value
