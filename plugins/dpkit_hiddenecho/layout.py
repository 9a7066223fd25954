"""What both sides agree on from public inputs alone: the layout, special positions, the schedule.

The client and the server each compute these from the defense's params (public: they are in the
spec) and the public model; only the layer filter's pick needs something that crossed the wire
(the server scores the noisy samples it received and answers with the layers).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from dpkit_hiddenecho.layer_filter import evenly_spaced_layers
from dpkit_hiddenecho.params import HiddenEchoParams, SplitTrainingParams


@dataclass(frozen=True)
class Layout:
    """What is sent and how it is corrected: chosen layers, where they are reduced, which parts run."""

    layers: tuple[int, ...]
    width: int
    reduce_on_server: bool
    denoise: bool = True
    residual: bool = True
    ib_alpha: float = 0.0
    ib_beta: float = 0.5
    mine_steps: int = 1
    mine_tokens: int = 256
    mine_hidden: int = 64
    heads: int = 4
    dropout: float = 0.1


def needs_filter(params: SplitTrainingParams) -> bool:
    """Whether the layers come from the integrated-gradient filter (run by the server)."""
    return isinstance(params, HiddenEchoParams) and params.layers == "filter"


def layout_for(params: SplitTrainingParams, num_layers: int, hidden_size: int,
               filtered: list[int] | None = None) -> Layout:
    """The layout of a defense's params on a body of ``num_layers`` blocks of width
    ``hidden_size``; ``filtered`` are the layer filter's pick (needed when it runs)."""
    if not isinstance(params, HiddenEchoParams):  # LDP: the last layer at full width, no denoiser
        return Layout(layers=(num_layers - 1,), width=hidden_size, reduce_on_server=False,
                      denoise=False)
    if params.layers == "all":
        layers = list(range(num_layers))
    elif params.layers == "fixed":
        layers = evenly_spaced_layers(params.top_k + int(params.keep_last), num_layers)
    elif filtered is None:
        raise ValueError("layers: filter picks the layers from the noisy samples the server "
                         "scores; send them (phase 'layer_filter') before building the layout")
    else:
        layers = list(filtered)
    if hidden_size % params.reduction_factor:
        raise ValueError(f"reduction_factor={params.reduction_factor} must divide the model "
                         f"width {hidden_size}")
    p = params
    return Layout(layers=tuple(layers), width=hidden_size // p.reduction_factor,
                  reduce_on_server=p.reduction != "none", residual=p.residual,
                  ib_alpha=p.ib_alpha if p.reduction == "ib" else 0.0, ib_beta=p.ib_beta,
                  mine_steps=p.mine_steps, mine_tokens=p.mine_tokens,
                  heads=p.denoiser_heads, dropout=p.dropout)


def frozen_count(params: SplitTrainingParams, num_layers: int) -> int:
    """Blocks below the first LoRA adapter (0 when every block is adapted)."""
    return 0 if params.lora_layers is None else max(num_layers - params.lora_layers, 0)


def special_positions(tokenizer) -> tuple[int, int]:
    """How many special tokens the tokenizer's template puts before and after a text's own
    tokens (BERT: [CLS] … [SEP] = (1, 1); a Llama template "<s> $A" = (1, 0))."""
    framed = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    for lead in range(len(framed) - len(plain) + 1):
        if framed[lead:lead + len(plain)] == plain:
            return lead, len(framed) - lead - len(plain)
    raise ValueError("could not find a text's tokens inside the tokenizer's template")


def attack_rows(mask: torch.Tensor, lead: int, trail: int) -> torch.Tensor:
    """The real positions of a ``[B, n]`` batch that hold the text's own tokens (the template's
    ``lead`` and ``trail`` special tokens left out): what the server keeps for the attacks and
    what the client's truth lists, both computed from public structure."""
    lengths = mask.long().sum(1, keepdim=True)
    position = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
    return mask.bool() & (position >= lead) & (position < lengths - trail)


def warmup_then_decay(total_steps: int, warmup: float):
    """Learning-rate factor per step: linear warm-up over ``warmup`` of the steps, then linear decay."""
    ramp = max(1, round(warmup * total_steps))

    def factor(step: int) -> float:
        if step < ramp:
            return (step + 1) / ramp
        return max(0.0, (total_steps - step) / max(1, total_steps - ramp))

    return factor


def training_steps(params: SplitTrainingParams, n_fit: int) -> int:
    """Optimizer steps of a run training on ``n_fit`` examples for ``params.epochs`` epochs."""
    return params.epochs * -(-n_fit // params.batch_size)
