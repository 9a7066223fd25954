"""The client's training loop: end-to-end split fine-tuning, its curves and the validation pass.

The client trains its modules with its own optimizer and schedule; the server steps its own on the
gradients the client sends (:mod:`dpkit_hiddenecho.server`). Before training the client sends the
step count (so the server builds the same schedule), after each epoch it tells the server the
epoch is over (the server keeps that epoch's parameters and reports its critics and CPU time),
and with early stopping it sends the kept epoch at the end, so the server puts back its
parameters of the epoch whose client modules are kept.
"""

from __future__ import annotations

import math
import time
from typing import ClassVar

import torch
from torch import nn

from dpkit import DOWN, UP, TrainingCurve, Validation, auc, fit_epochs
from dpkit_hiddenecho.client import SplitClient
from dpkit_hiddenecho.data import batches
from dpkit_hiddenecho.layout import training_steps, warmup_then_decay
from dpkit_hiddenecho.params import SplitTrainingParams
from dpkit_hiddenecho.server_parts import process_id

__all__ = ["SplitFineTuning", "warmup_then_decay"]


class SplitFineTuning:
    """The training loop shared by HiddenEcho and its baselines (``self.params``, ``self.name``)."""

    name: ClassVar[str]
    params: SplitTrainingParams

    def train(self, client: SplitClient, split, val, ctx) -> tuple[dict[str, float], list]:
        """Fine-tune the client modules (and, through the wire, the server's) end to end; time
        each epoch and record the training curves (task loss on ``split`` and on the held-out
        ``val``, MINE critics of both sides)."""
        p, model, wire = self.params, client.model, client.wire
        optimizer = torch.optim.AdamW(client.trainable(), lr=p.lr)
        total = training_steps(p, len(split))
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_then_decay(total, p.warmup))
        wire.phase = "setup"
        wire.send("schedule", torch.tensor([total]))
        order = ctx.generator("hiddenecho/order", "cpu")
        curves = self.curves(client)
        seconds, cpu, server_cpu = [], [], []

        def train_epoch(epoch: int) -> float:
            client.train(True)
            wire.phase = "train"
            start, start_cpu, loss_sum = time.perf_counter(), time.process_time(), 0.0
            for _ids, noisy, clean, mask, labels in batches(model, split, p.batch_size,
                                                            model.tokenizer.pad_token_id, order):
                optimizer.zero_grad(set_to_none=True)
                loss_sum += client.step(noisy, clean, mask, labels) * len(labels)
                if p.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(client.trainable(), p.max_grad_norm)
                optimizer.step()
                schedule.step()
            report = wire.send("end_epoch")
            seconds.append(time.perf_counter() - start)
            own = time.process_time() - start_cpu
            isolated = report["process"] != process_id()  # in-process, own already counts it
            server_cpu.append(float(report["cpu_seconds"]) if isolated else math.nan)
            cpu.append(own + (server_cpu[-1] if isolated else 0.0))
            self.record_critics(curves, epoch, client.critic_bounds, report["critic_bound"])
            return loss_sum / len(split)

        def validate() -> Validation:
            val_loss, val_auc = self.validate(client, val)
            epoch = len(curves["task"].steps) + 1
            ctx.say(f"{self.name} epoch {epoch}/{p.epochs}: validation loss {val_loss:.3f}, "
                    f"AUC {val_auc:.3f}, {seconds[-1]:.1f} s")
            return Validation(loss=val_loss, metric=val_auc)

        fit_epochs(curves["task"], p.epochs, train_epoch, validate, modules=(client.modules,),
                   patience=p.patience, watch="loss" if p.stop_on == "loss" else "metric")
        task = curves["task"]
        if p.patience is not None:  # the server puts back its parameters of the kept epoch
            wire.phase = "restore"
            wire.send("schedule", torch.tensor([task.best_step]))
        for curve in curves.values():
            curve.best_step, curve.stopped_early = task.best_step, task.stopped_early
        if task.stopped_early:
            ctx.say(f"{self.name}: validation {p.stop_on} not improved for {p.patience} epochs; "
                    f"stopped, keeping epoch {task.best_step}")
        metrics = {"epoch_seconds": sum(seconds) / len(seconds),
                   "epoch_cpu_seconds": sum(cpu) / len(cpu),
                   "train_examples_used": float(len(split)), "val_examples": float(len(val)),
                   "bytes_per_batch_train": wire.per_batch("train"),
                   "bytes_up_per_batch_train": wire.per_batch("train", UP),
                   "bytes_down_per_batch_train": wire.per_batch("train", DOWN)}
        if not any(math.isnan(s) for s in server_cpu):
            metrics["epoch_server_cpu_seconds"] = sum(server_cpu) / len(server_cpu)
        return metrics, list(curves.values())

    def curves(self, client: SplitClient) -> dict[str, TrainingCurve]:
        """Empty curves of the trained parts: the split model first, then the MINE critics."""
        curves = {"task": TrainingCurve(f"{self.name} split model (server LoRA and maps, client "
                                        "denoiser and head): task cross-entropy",
                                        val_metric_name="auc")}
        if len(client.modules.mine_out):  # the server has critics exactly when the client has
            curves["server"] = TrainingCurve(f"{self.name} server MINE critics I(E'; H^dn): "
                                             "negative Donsker-Varadhan bound")
            curves["client"] = TrainingCurve(f"{self.name} client MINE critics I(H^den; H^dn): "
                                             "negative Donsker-Varadhan bound")
        return curves

    @staticmethod
    def record_critics(curves: dict[str, TrainingCurve], epoch: int, client_bounds: list[float],
                       server_bound: float) -> None:
        """Add one epoch's MINE critic losses: the mean negated bound over the epoch's fits (the
        server's mean comes with its end-of-epoch report)."""
        if "server" in curves:
            curves["server"].add(epoch, -float(server_bound))
        if "client" in curves:
            curves["client"].add(epoch, -sum(client_bounds) / max(len(client_bounds), 1))
        client_bounds.clear()

    def validate(self, client: SplitClient, val) -> tuple[float, float]:
        """Mean task loss and AUC on the held-out training examples (``nan`` when none are held
        out).

        The held-out noisy embeddings cross the wire as at inference (phase ``validation``):
        their tokens are among the declared ones, drawn once, so the ledger is unchanged. Runs in
        evaluation mode without gradients and draws no random numbers, so training is unaffected.
        """
        if not len(val):
            return float("nan"), float("nan")
        client.train(False)
        client.wire.phase = "validation"
        model, total, probs = client.model, 0.0, []
        for _ids, noisy, clean, mask, labels in batches(model, val, self.params.batch_size,
                                                        model.tokenizer.pad_token_id):
            logits = client.logits(noisy, clean, mask)
            total += float(nn.functional.cross_entropy(logits, labels, reduction="sum"))
            probs.append(logits.softmax(-1))
        return total / len(val), auc(torch.cat(probs), val.labels)
