"""Hidden-layer filter: integrated-gradient contribution of each server layer (Eq. 9–11)."""

from __future__ import annotations

import torch

from dpkit_hiddenecho.body import ReplaceOutput, transformer_blocks


def readout_direction(last: torch.Tensor) -> torch.Tensor:
    """Unit vectors along the actual last-layer states: the scalar output IG explains."""
    return torch.nn.functional.normalize(last.detach(), dim=-1)


def ig_baseline(state: torch.Tensor, mask: torch.Tensor, kind: str) -> torch.Tensor:
    """The path start: zeros (Eq. 10 as printed) or each sequence's mean state over its tokens."""
    if kind == "zero":
        return torch.zeros_like(state)
    if kind == "mean":
        w = mask.to(state.dtype).unsqueeze(-1)
        return ((state * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1.0)).expand_as(state)
    raise ValueError(f"IG baseline must be 'zero' or 'mean', got {kind!r}")


def layer_contribution(model, blocks, layer: int, inputs_embeds: torch.Tensor,
                       mask: torch.Tensor, state: torch.Tensor, direction: torch.Tensor,
                       steps: int, baseline: str = "mean") -> torch.Tensor:
    """Per-sample C_i (Eq. 11) of block ``layer`` whose clean output is ``state`` ``[B, n, d]``.

    Ĥ_i runs over b + (j/m)(H_i − b), j = 1..m (all m points in one batched forward); the last
    layer's output is read out as s(Ĥ) = Σ_t ⟨Ĥ_{L-1,t}, u_t⟩ with u_t the unit actual output, so
    C_i sums (H_i − b) ⊙ mean-gradient over tokens and features; by completeness
    C_i ≈ s(H) − s(H | H_i = b). The paper's b = 0 is degenerate after a LayerNorm/RMSNorm (the
    output is invariant to scaling H_i, so IG ≈ 0); the per-sequence mean state avoids that.
    """
    b = state.shape[0]
    base = ig_baseline(state, mask, baseline)
    alphas = torch.arange(1, steps + 1, device=state.device, dtype=state.dtype) / steps
    point = base.unsqueeze(0) + alphas.view(steps, 1, 1, 1) * (state - base).unsqueeze(0)
    point = point.reshape(steps * b, *state.shape[1:])
    point = point.detach().requires_grad_(True)
    handle = blocks[layer].register_forward_hook(ReplaceOutput(point))
    try:
        out = model.server_forward(inputs_embeds.repeat(steps, 1, 1), mask.repeat(steps, 1),
                                   output_hidden_states=False).last_hidden
    finally:
        handle.remove()
    weights = mask.to(out.dtype).repeat(steps, 1).unsqueeze(-1)
    score = (out * direction.repeat(steps, 1, 1) * weights).sum()
    (grad,) = torch.autograd.grad(score, point)
    mean_grad = grad.view(steps, *state.shape).mean(0)
    tokens = mask.to(state.dtype).unsqueeze(-1)
    return ((state - base) * mean_grad * tokens).sum(dim=(1, 2))


def layer_contributions(model, inputs_embeds: torch.Tensor, mask: torch.Tensor,
                        steps: int = 8, batch_size: int = 8, baseline: str = "mean") -> torch.Tensor:
    """Mean |C_i| per token for every block but the last, over the given (noisy) samples ``[L-1]``.

    ``model`` is a :class:`dpkit.models.SplitModel`; the samples are embedded and perturbed as
    in training but not denoised. Runs before fine-tuning, with gradients only to the probe.
    """
    if steps < 1:
        raise ValueError(f"integrated gradients needs steps ≥ 1, got {steps}")
    blocks = transformer_blocks(model.server, model.num_layers)
    totals = torch.zeros(model.num_layers - 1, device=inputs_embeds.device)
    for start in range(0, inputs_embeds.shape[0], batch_size):
        emb = inputs_embeds[start:start + batch_size].detach()
        m = mask[start:start + batch_size]
        with torch.no_grad():
            out = model.server_forward(emb, m, output_hidden_states=True)
        states, direction = out.hidden_states[1:], readout_direction(out.last_hidden)
        n_tokens = m.sum(1).clamp_min(1).to(emb.dtype)
        for layer in range(model.num_layers - 1):
            c = layer_contribution(model, blocks, layer, emb, m, states[layer], direction, steps,
                                   baseline)
            totals[layer] += (c.abs() / n_tokens).sum()
    return totals / inputs_embeds.shape[0]


def select_layers(contributions: torch.Tensor, top_k: int, num_layers: int,
                  keep_last: bool = True) -> list[int]:
    """Indices of the ``top_k`` highest contributions (sorted), plus the last layer if kept."""
    k = min(top_k, contributions.numel())
    chosen = torch.topk(contributions, k).indices.tolist() if k else []
    if keep_last:
        chosen.append(num_layers - 1)
    return sorted(set(chosen))


def evenly_spaced_layers(count: int, num_layers: int) -> list[int]:
    """The −HLF ablation: ``count`` fixed layers spread evenly, always ending at the last layer."""
    count = max(1, min(count, num_layers))
    picks = torch.linspace(num_layers - 1, 0, count + 1)[:count].round().long().tolist()
    return sorted(set(int(p) for p in picks))
