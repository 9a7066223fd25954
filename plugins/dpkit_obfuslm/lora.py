"""LoRA fine-tuning of a causal LM on (obfuscated) token ids: what ObfusLM's generation server runs."""

from __future__ import annotations

import torch

from dpkit import TrainingCurve, with_lora

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CURVE_POINTS = 20


def lm_loss(model, ids: torch.Tensor, mask: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` on ``ids`` (padding not scored)."""
    ids, mask = ids.to(device), mask.to(device)
    return model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss


@torch.no_grad()
def validation_loss(model, data, batch_size: int, device: torch.device) -> float:
    """Mean next-token loss over the held-out ``data`` (Encoded), batch by batch, in eval mode."""
    model.eval()
    losses = [float(lm_loss(model, data.ids[i:i + batch_size], data.mask[i:i + batch_size],
                            device)) for i in range(0, len(data), batch_size)]
    model.train()
    return sum(losses) / len(losses)


def lora_fine_tune(model, data_ids: torch.Tensor, mask: torch.Tensor, p,
                   generator: torch.Generator, device: torch.device, validation=None):
    """Wrap ``model`` with LoRA adapters on every linear layer and train ``p.steps`` steps;
    returns the model and its curve (mean training loss since the last point, loss on the
    ``validation`` texts), recorded CURVE_POINTS times over the run."""
    from peft import LoraConfig

    present = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    config = LoraConfig(r=p.lora_r, lora_alpha=p.lora_alpha, lora_dropout=0.0,
                        target_modules=[t for t in LORA_TARGETS if t in present])
    model = with_lora(model, config)
    opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=p.lr,
                            betas=(0.9, 0.95))
    model.train()
    curve, every = TrainingCurve("LoRA fine-tuning", unit="step"), max(1, p.steps // CURVE_POINTS)
    since, total = 0, 0.0
    for step in range(1, p.steps + 1):
        idx = torch.randint(0, data_ids.shape[0], (p.batch_size,), generator=generator,
                            device=generator.device).cpu()
        loss = lm_loss(model, data_ids[idx], mask[idx], device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        since, total = since + 1, total + float(loss.detach())
        if step % every == 0 or step == p.steps:
            val = (float("nan") if validation is None
                   else validation_loss(model, validation, p.batch_size, device))
            curve.add(step, total / since, val)
            since, total = 0, 0.0
    return model.eval(), curve
