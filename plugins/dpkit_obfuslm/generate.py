"""Generation with an obfuscated causal LM: LoRA fine-tuning and greedy decoding on the server,
tokenization and decoding with the secret permutation on the client."""

from __future__ import annotations

import copy
import math
import time
from types import SimpleNamespace
from typing import ClassVar

import torch

import dpkit
from dpkit import TrainingCurve, attach_curves, declare_releases, with_lora
from dpkit_obfuslm.classify import Encoded
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import (
    build_view,
    obfuscate_model,
    obfuscation_knowledge,
    releases,
    send_model,
)
from dpkit_obfuslm.obfuscate import VocabKey
from dpkit_obfuslm.scoring import rouge_l
from dpkit_obfuslm.params import GenerateParams

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


CURVE_POINTS = 20


def _lm_loss(model, ids: torch.Tensor, mask: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Next-token cross-entropy of ``model`` on ``ids`` (padding not scored)."""
    ids, mask = ids.to(device), mask.to(device)
    return model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss


@torch.no_grad()
def _validation_loss(model, data, batch_size: int, device: torch.device) -> float:
    """Mean next-token loss over the held-out ``data`` (Encoded), batch by batch, in eval mode."""
    model.eval()
    losses = [float(_lm_loss(model, data.ids[i:i + batch_size], data.mask[i:i + batch_size],
                             device)) for i in range(0, len(data), batch_size)]
    model.train()
    return sum(losses) / len(losses)


def lora_fine_tune(model, data_ids: torch.Tensor, mask: torch.Tensor, p: GenerateParams,
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
        loss = _lm_loss(model, data_ids[idx], mask[idx], device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        since, total = since + 1, total + float(loss.detach())
        if step % every == 0 or step == p.steps:
            val = (float("nan") if validation is None
                   else _validation_loss(model, validation, p.batch_size, device))
            curve.add(step, total / since, val)
            since, total = 0, 0.0
    return model.eval(), curve


class ObfusLMGenerate(dpkit.Component):
    """ObfusLM generation (smoke scale): obfuscated SmolLM2/Llama, LoRA fine-tuning on
    obfuscated ids, greedy completion of obfuscated prompts, client-side decoding, ROUGE-L."""

    name: ClassVar[str] = "obfuslm_generate"
    Params: ClassVar[type[GenerateParams]] = GenerateParams

    def _prepared(self, ctx) -> SimpleNamespace:
        """The server's model copy, the obfuscated tables and the encoded texts, once per run."""
        return ctx.prepared(self, lambda: self._prepare(ctx))

    def _prepare(self, ctx) -> SimpleNamespace:
        p, model = self.params, ctx.model
        if model is None or not model.causal:
            raise ValueError("obfuslm_generate needs a causal LM (smollm2-135m or tiny-causal) "
                             "as the spec's model")
        server = copy.deepcopy(model.server)
        table = model.embedding_table.float()
        head_mod = server.get_output_embeddings()
        head = None if head_mod is None or head_mod.weight is server.get_input_embeddings().weight \
            else head_mod.weight.detach().float()
        tables, metrics = (obfuscate_model(ctx, server, table, head, p) if p.obfuscate
                           else (None, {}))
        key = tables.key if tables is not None else VocabKey.identity(model.vocab_size)
        client = ObfusClient(model, key, p.max_length)
        train, validation = _train_and_validation(client, list(ctx.dataset["train"].texts), p)
        need = p.prompt_tokens + p.new_tokens
        pool = client.tokenize(list(ctx.dataset["test"].texts))
        long_enough = pool.mask.sum(1) >= need
        if int(long_enough.sum()) == 0:
            raise ValueError(f"obfuslm_generate: no test text has {need} tokens; lower "
                             "prompt_tokens / new_tokens or raise max_length")
        chosen = pool.ids[long_enough][: p.n_eval, :need]
        return SimpleNamespace(server=server, table=table, tables=tables, metrics=metrics, key=key,
                               client=client, train=train, validation=validation,
                               prompts=chosen[:, : p.prompt_tokens],
                               reference=chosen[:, p.prompt_tokens:])

    def releases(self, ctx) -> list[dpkit.Release]:
        """Tables ((k, ε)) when obfuscating, the id stream (∞: deterministic ids) and masks."""
        st = self._prepared(ctx)
        n_ids = int(st.train.mask.sum() + st.validation.mask.sum()) + st.prompts.numel()
        return [*releases(st.tables, self.params if self.params.obfuscate else None, n_ids, 0),
                dpkit.Release("mask", None, "attention masks: text lengths, sent with the ids",
                              covered_by="token_ids")]

    def run(self, ctx) -> dpkit.DefenseResult:
        """Obfuscate (declared first), fine-tune, complete prompts, score and build the view."""
        declare_releases(self, ctx)
        p, model, wire = self.params, ctx.model, ctx.wire
        st = self._prepared(ctx)
        metrics, key, client, prompts = dict(st.metrics), st.key, st.client, st.prompts
        if st.tables is not None:
            send_model(wire, st.server, p)
        train_ids = wire.send("token_ids", st.train.ids, rows=st.train.mask)
        train_mask = wire.send("mask", st.train.mask)
        validation = Encoded(wire.send("token_ids", st.validation.ids, rows=st.validation.mask),
                             wire.send("mask", st.validation.mask))
        started = time.perf_counter()
        server, curve = lora_fine_tune(st.server, train_ids, train_mask, p,
                                       ctx.generator("obfuslm.lora"), ctx.device, validation)
        metrics.update(train_loss=curve.final_train, train_s=time.perf_counter() - started,
                       train_examples=float(len(st.train)),
                       validation_examples=float(len(validation)))
        prompts = wire.send("token_ids", prompts, observe="prompts")
        eos = model.tokenizer.eos_token_id
        pad = model.tokenizer.pad_token_id
        with torch.no_grad():
            out = server.generate(input_ids=prompts.to(ctx.device),
                                  attention_mask=torch.ones_like(prompts).to(ctx.device),
                                  max_new_tokens=p.new_tokens, do_sample=False,
                                  eos_token_id=None if eos is None else client.special_obfuscated_id(eos),
                                  pad_token_id=None if pad is None else client.special_obfuscated_id(pad))
        generated = wire.reply("completions", out[:, p.prompt_tokens:].cpu(), observe="completions")
        decoded = key.decode(generated)
        metrics["rougeL_generation"] = rouge_l(list(decoded), list(key.decode(st.reference)))
        metrics["decoded_example_chars"] = float(len(client.decode(generated[:1])[0]))
        sent = wire.derive("token_ids", lambda a, b: list(torch.cat([a, b], 1)),
                           "prompts", "completions")
        weight = server.get_input_embeddings().weight.detach()
        wire.derive("obfuscated_table", lambda *_: weight, "token_ids",
                    server_state={"fine-tuned server model": weight})
        view = build_view(wire, [key.decode(s) for s in sent], st.table, [],
                          model.special_token_ids(), obfuscation_knowledge(p) if p.obfuscate else {},
                          key.forward)
        result = dpkit.DefenseResult(metrics=metrics, view=view, wire_bytes=wire.summary())
        if curve.steps:
            attach_curves(result, [curve])
        return result


def _train_and_validation(client: ObfusClient, texts: list[str], p: GenerateParams):
    """Fine-tuning texts and the held-out validation texts after them (taken off the end of the
    fine-tuning texts where the split is too short), tokenized for the server."""
    n_val = math.ceil(p.validation_share * min(p.max_train, len(texts)))
    n_train = min(p.max_train, len(texts) - n_val)
    if n_train < 1:
        raise ValueError(f"obfuslm_generate: {len(texts)} train texts leave none to fine-tune on "
                         f"after {n_val} validation texts; lower validation_share")
    return (client.tokenize(texts[:n_train]),
            client.tokenize(texts[n_train:n_train + n_val]))
