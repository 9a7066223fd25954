"""The server part of HiddenEcho and its baselines, built in the server's own process.

From public inputs only — the spec's model (loaded there by name) and the defense's params — the
server builds its own copy of the body with LoRA adapters, its down-sampling maps (Eq. 4) and
I(E'; H^dn) critics, and (once the client sends the step count) its optimizer and schedule. It
answers each upload of noisy embeddings with the chosen blocks' states; in training it keeps its
graph until the client's gradients of those states come up, then runs backward (with its own
information-bottleneck term) and steps. It keeps, for the attacks, the first ``attack_tokens``
test rows it received (the template's special tokens left out). Its randomness (adapter and map
initialisation, dropout, MINE sampling) comes from its own seed.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import torch

import dpkit
from dpkit_hiddenecho.body import attach_lora, private_copy, transformer_blocks
from dpkit_hiddenecho.frozen_blocks import FrozenBlockCache, StateStore
from dpkit_hiddenecho.layer_filter import layer_contributions, select_layers
from dpkit_hiddenecho.layout import (
    attack_rows,
    frozen_count,
    layout_for,
    needs_filter,
    special_positions,
    warmup_then_decay,
)
from dpkit_hiddenecho.server_parts import (
    OwnRandom,
    ServerModules,
    body_states,
    process_id,
    trained_state,
)


class HiddenEchoServer(dpkit.Server):
    """The untrusted side of ``hiddenecho``, ``hiddenecho_full`` and ``hiddenecho_ldp``."""

    phases: ClassVar[tuple[str, ...]] = ("layer_filter",)  # besides dpkit.STANDARD_PHASES
    PHASES = ("layer_filter", "train", "validation", "eval")

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        model = public.model
        if model is None or not hasattr(model, "server_forward"):
            raise ValueError(f"HiddenEcho's server needs a split model (spec `model:`, e.g. minilm "
                             f"or tiny-encoder), got {type(model).__name__}")
        self.model = private_copy(model)  # the loaded one stays as loaded
        self.random = OwnRandom(public.seed, public.device)
        self.generator = public.generator("hiddenecho/mine", "cpu")
        self.lead, self.trail = special_positions(model.tokenizer)
        self.layout = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.pending: tuple[list[torch.Tensor], torch.Tensor | None] | None = None
        self.critic_bounds: list[float] = []
        self.snapshots: dict[int, list[dict[str, torch.Tensor]]] = {}
        self.epoch = 0
        self.cpu_mark: float | None = None  # CPU time at the epoch's first training step
        if not needs_filter(params):
            self.build(None)

    # ------------------------------------------------------------------ building
    def build(self, filtered: list[int] | None) -> None:
        """LoRA on the body copy, the maps and critics of the layout, the frozen-block cache."""
        p, model = self.params, self.model
        self.layout = layout_for(p, model.num_layers, model.hidden_size, filtered)
        with self.random.active():
            attach_lora(model, p.lora_rank, p.lora_alpha, 0.0, p.lora_targets, p.lora_layers)
            self.modules = ServerModules(self.layout, model.hidden_size).to(model.device)
        n_frozen = frozen_count(p, model.num_layers)
        self.frozen = None
        if n_frozen and not p.frozen_dropout:  # one store per cell: nothing crosses cells
            self.frozen = FrozenBlockCache(
                model.server, transformer_blocks(model.server, model.num_layers), n_frozen,
                reuse=p.reuse_frozen, store=StateStore(p.precision), precision=p.precision)

    def trainable(self) -> list[torch.nn.Parameter]:
        """LoRA adapters and down-sampling maps (the critics have their own optimizers)."""
        parts = [self.model.server, self.modules.down]
        return [q for m in parts if m is not None for q in m.parameters() if q.requires_grad]

    def set_mode(self, training: bool) -> None:
        """Training or evaluation mode for the body and the maps; frozen blocks stay in eval."""
        for module in (self.model.server, self.modules):
            module.train(training)
        if self.frozen is not None:
            self.frozen.evaluation_mode()

    def padded(self, message: dpkit.Message) -> tuple[torch.Tensor, torch.Tensor]:
        """The received batch with its padding rows restored to the public [PAD] embedding."""
        x = message.tensor.float()
        mask = message.mask if message.mask is not None else torch.ones(
            x.shape[:-1], dtype=torch.bool, device=x.device)
        pad = self.model.embedding_table[self.model.tokenizer.pad_token_id].to(x.dtype)
        return torch.where(mask.unsqueeze(-1), x, pad), mask

    # ------------------------------------------------------------------ handlers
    @dpkit.handles("embeddings")
    def embeddings(self, message: dpkit.Message) -> dict[str, Any]:
        """Noisy embeddings up; the chosen blocks' states down (the layer pick in phase
        ``layer_filter``)."""
        if message.phase not in self.PHASES:
            raise ValueError(f"embeddings arrived in phase {message.phase!r}; HiddenEcho's server "
                             f"knows {', '.join(self.PHASES)}")
        x, mask = self.padded(message)
        if message.phase == "layer_filter":
            return self.filter_layers(x, mask)
        if self.layout is None:
            raise ValueError("layers: filter: send the layer filter's samples (phase "
                             "'layer_filter') before any other embeddings")
        with self.random.active():
            if message.phase == "train":
                return self.train_forward(x, mask)
            self.set_mode(False)
            with torch.no_grad():
                states = self.forward(x, mask)
        if message.phase == "eval":
            shown = attack_rows(mask, self.lead, self.trail)
            self.observe("embeddings", message.tensor[shown], keep=self.params.attack_tokens)
        return {"states": states, "needs_grad": []}

    def filter_layers(self, x: torch.Tensor, mask: torch.Tensor) -> dict[str, Any]:
        """Top-k blocks by integrated-gradient contribution on the received noisy samples (the
        body before its adapters); builds the rest of the server on that pick."""
        p = self.params
        if self.layout is not None:
            raise ValueError("the layers are already chosen; the layer filter runs once")
        with self.random.active():
            scores = layer_contributions(self.model, x, mask, p.ig_steps, baseline=p.ig_baseline)
        layers = select_layers(scores, p.top_k, self.model.num_layers, p.keep_last)
        self.build(layers)
        return {"layers": layers, "contributions": [float(s) for s in scores]}

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        """The states to send: chosen blocks (fp32), down-sampled on the server when it reduces."""
        chosen = body_states(self.model, self.layout.layers, x, mask, self.frozen,
                             self.params.precision)
        return self.modules.down(chosen) if self.modules.down is not None else chosen

    def train_forward(self, x: torch.Tensor, mask: torch.Tensor) -> dict[str, Any]:
        """Training forward: keep the graph (and the server's IB term) for the gradients."""
        if self.optimizer is None:
            raise ValueError("training embeddings arrived before the schedule; send the step "
                             "count (release 'schedule', phase 'setup') first")
        if self.cpu_mark is None:
            self.cpu_mark = time.process_time()
        self.set_mode(True)
        states = self.forward(x, mask)
        ib = self.modules.ib_term(x, states, mask, self.generator, self.critic_bounds)
        needs_grad = [i for i, h in enumerate(states) if h.requires_grad]
        self.pending = ([states[i] for i in needs_grad], ib)
        return {"states": [h.detach() for h in states], "needs_grad": needs_grad}

    @dpkit.handles("gradients")
    def gradients(self, message: dpkit.Message) -> None:
        """The client's gradients of the states asked for: backward, clip, step."""
        if self.pending is None:
            raise ValueError("gradients arrived without a training forward to apply them to")
        (states, ib), self.pending = self.pending, None
        grads = list(message.tensor.unbind(0)) if message.tensor.numel() else []
        if len(grads) != len(states):
            raise ValueError(f"{len(grads)} gradients for {len(states)} states with trainable "
                             "parts behind them")
        tensors, outputs = list(states), list(grads)
        if ib is not None and ib.requires_grad:
            tensors.append(self.layout.ib_alpha * ib)
            outputs.append(None)
        with self.random.active():
            if tensors:
                torch.autograd.backward(tensors, outputs)
            if self.params.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.trainable(), self.params.max_grad_norm)
            self.optimizer.step()
            self.schedule.step()
            self.optimizer.zero_grad(set_to_none=True)

    @dpkit.handles("schedule")
    def schedule_message(self, message: dpkit.Message) -> None:
        """Phase ``setup``: the run's step count (builds the optimizer and its schedule);
        phase ``restore``: the epoch whose parameters early stopping keeps."""
        value = int(message.tensor.reshape(-1)[0])
        if message.phase == "setup":
            self.optimizer = torch.optim.AdamW(self.trainable(), lr=self.params.lora_lr)
            self.schedule = torch.optim.lr_scheduler.LambdaLR(
                self.optimizer, warmup_then_decay(value, self.params.warmup))
        elif message.phase == "restore":
            if value not in self.snapshots:
                raise ValueError(f"no parameters kept for epoch {value}; kept: "
                                 f"{sorted(self.snapshots)}")
            for module, state in zip(self.snapshot_modules(), self.snapshots[value]):
                tensors = dict(module.named_parameters()) | dict(module.named_buffers())
                for name, saved in state.items():
                    tensors[name].data.copy_(saved)
        else:
            raise ValueError(f"schedule message in phase {message.phase!r}; expected 'setup' "
                             "or 'restore'")

    @dpkit.handles("end_epoch")
    def end_epoch(self, message: dpkit.Message) -> dict[str, Any]:
        """One training epoch is over: keep its parameters (with patience) and report the
        critics' mean bound and the server's CPU seconds of the epoch."""
        self.epoch += 1
        if self.params.patience is not None:
            self.snapshots[self.epoch] = [trained_state(m) for m in self.snapshot_modules()]
        bounds, self.critic_bounds = self.critic_bounds, []
        start, self.cpu_mark = self.cpu_mark, None
        cpu = 0.0 if start is None else time.process_time() - start
        return {"critic_bound": sum(bounds) / len(bounds) if bounds else float("nan"),
                "cpu_seconds": cpu, "process": process_id()}

    def snapshot_modules(self) -> tuple[torch.nn.Module, ...]:
        """What early stopping restores: the adapted body, the maps and the critics."""
        return (self.model.server, self.modules)
