"""End-to-end fine-tuning of a split deployment, with its training curves and validation loss."""

from __future__ import annotations

import time
from typing import ClassVar

import torch
from torch import nn

from dpkit import DOWN, TrainingCurve, UP, Validation, auc, fit_epochs
from dpkit_hiddenecho.data import batches
from dpkit_hiddenecho.params import SplitTrainingParams
from dpkit_hiddenecho.protocol import SplitProtocol


def warmup_then_decay(total_steps: int, warmup: float):
    """Learning-rate factor per step: linear warm-up over ``warmup`` of the steps, then linear decay."""
    ramp = max(1, round(warmup * total_steps))

    def factor(step: int) -> float:
        if step < ramp:
            return (step + 1) / ramp
        return max(0.0, (total_steps - step) / max(1, total_steps - ramp))

    return factor


class SplitFineTuning:
    """The training loop shared by HiddenEcho and its baselines (``self.params``, ``self.name``)."""

    name: ClassVar[str]
    params: SplitTrainingParams

    def train(self, proto: SplitProtocol, split, val, ctx) -> tuple[dict[str, float], list]:
        """Fine-tune client modules and server LoRA end to end; time each epoch and record the
        training curves (task loss on ``split`` and on the held-out ``val``, MINE critics)."""
        p, pad = self.params, proto.model.tokenizer.pad_token_id
        sides = {side: proto.trainable(side) for side in ("client", "server")}
        optimizers = [torch.optim.AdamW(sides["client"], lr=p.lr),
                      torch.optim.AdamW(sides["server"], lr=p.lora_lr)]
        total = p.epochs * -(-len(split) // p.batch_size)
        schedules = [torch.optim.lr_scheduler.LambdaLR(o, warmup_then_decay(total, p.warmup))
                     for o in optimizers]
        order = ctx.generator("hiddenecho/order", "cpu")
        curves = self.curves(proto)
        trained = (proto.client, proto.server, proto.model.server)
        seconds, cpu = [], []

        def train_epoch(epoch: int) -> float:
            proto.train(True)
            proto.wire.phase = "train"
            start, start_cpu, loss_sum = time.perf_counter(), time.process_time(), 0.0
            for _ids, noisy, clean, mask, labels in batches(proto.model, split, p.batch_size, pad,
                                                            order):
                for opt in optimizers:
                    opt.zero_grad(set_to_none=True)
                loss_sum += proto.step(noisy, clean, mask, labels) * len(labels)
                if p.max_grad_norm is not None:
                    for params in sides.values():
                        torch.nn.utils.clip_grad_norm_(params, p.max_grad_norm)
                for opt, schedule in zip(optimizers, schedules):
                    opt.step()
                    schedule.step()
            seconds.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            self.record_critics(curves, proto, epoch)
            return loss_sum / len(split)

        def validate() -> Validation:
            val_loss, val_auc = self.validate(proto, val)
            epoch = len(curves["task"].steps) + 1
            ctx.say(f"{self.name} epoch {epoch}/{p.epochs}: validation loss {val_loss:.3f}, "
                    f"AUC {val_auc:.3f}, {seconds[-1]:.1f} s")
            return Validation(loss=val_loss, metric=val_auc)

        fit_epochs(curves["task"], p.epochs, train_epoch, validate, modules=trained,
                   patience=p.patience, watch="loss" if p.stop_on == "loss" else "metric")
        for curve in curves.values():
            curve.best_step, curve.stopped_early = (curves["task"].best_step,
                                                    curves["task"].stopped_early)
        if curves["task"].stopped_early:
            ctx.say(f"{self.name}: validation {p.stop_on} not improved for {p.patience} epochs; "
                    f"stopped, keeping epoch {curves['task'].best_step}")
        return ({"epoch_seconds": sum(seconds) / len(seconds),
                 "epoch_cpu_seconds": sum(cpu) / len(cpu),
                 "train_examples_used": float(len(split)), "val_examples": float(len(val)),
                 "bytes_per_batch_train": proto.wire.per_batch("train"),
                 "bytes_up_per_batch_train": proto.wire.per_batch("train", UP),
                 "bytes_down_per_batch_train": proto.wire.per_batch("train", DOWN)},
                list(curves.values()))

    def curves(self, proto: SplitProtocol) -> dict[str, TrainingCurve]:
        """Empty curves of the trained parts: the split model first, then the MINE critics."""
        curves = {"task": TrainingCurve(f"{self.name} split model (server LoRA and maps, client "
                                        "denoiser and head): task cross-entropy",
                                        val_metric_name="auc")}
        if len(proto.server.mine_in):
            curves["server"] = TrainingCurve(f"{self.name} server MINE critics I(E'; H^dn): "
                                             "negative Donsker-Varadhan bound")
        if len(proto.client.mine_out):
            curves["client"] = TrainingCurve(f"{self.name} client MINE critics I(H^den; H^dn): "
                                             "negative Donsker-Varadhan bound")
        return curves

    @staticmethod
    def record_critics(curves: dict[str, TrainingCurve], proto: SplitProtocol,
                       epoch: int) -> None:
        """Add one epoch's MINE critic losses: the mean negated bound over the epoch's fits."""
        for side in ("server", "client"):
            bounds = proto.critic_bounds[side]
            if side in curves:
                curves[side].add(epoch, -sum(bounds) / max(len(bounds), 1))
            bounds.clear()

    def validate(self, proto: SplitProtocol, val) -> tuple[float, float]:
        """Mean task loss and AUC on the held-out training examples (``nan`` when none are held
        out).

        The held-out noisy embeddings cross the wire as at inference (phase ``validation``):
        their tokens are among the declared ones, drawn once, so the ledger is unchanged. Runs in
        evaluation mode without gradients and draws no random numbers, so training is unaffected.
        """
        if not len(val):
            return float("nan"), float("nan")
        proto.train(False)
        proto.wire.phase = "validation"
        pad, total, probs = proto.model.tokenizer.pad_token_id, 0.0, []
        for _ids, noisy, clean, mask, labels in batches(proto.model, val, self.params.batch_size,
                                                        pad):
            logits = proto.logits(noisy, clean, mask, observe=False)
            total += float(nn.functional.cross_entropy(logits, labels, reduction="sum"))
            probs.append(logits.softmax(-1))
        return total / len(val), auc(torch.cat(probs), val.labels)
