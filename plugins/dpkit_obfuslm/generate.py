"""Generation with an obfuscated causal LM: tokenization, obfuscation and decoding with the secret
permutation on the client (here); LoRA fine-tuning and greedy completion on the server
(:class:`dpkit_obfuslm.server.GeneratorServer`, in its own process)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import ClassVar

import torch
import dpkit
from dpkit import TrainingCurve, attach_curves, declare_releases
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import obfuscate_model, padded_ids, releases
from dpkit_obfuslm.obfuscate import VocabKey
from dpkit_obfuslm.params import GenerateParams
from dpkit_obfuslm.scoring import rouge_l
from dpkit_obfuslm.server import GeneratorServer

SPECIALS_REASON = ("the ids of EOS and padding, which the server needs to stop and pad generation, "
                   "in the client's id space: under ObfusLM they name two entries of the secret "
                   "permutation")




class ObfusLMGenerate(dpkit.Component):
    """ObfusLM generation (smoke scale): obfuscated SmolLM2/Llama, LoRA fine-tuning on
    obfuscated ids, greedy completion of obfuscated prompts, client-side decoding, ROUGE-L."""

    name: ClassVar[str] = "obfuslm_generate"
    Params: ClassVar[type[GenerateParams]] = GenerateParams
    server: ClassVar[type[dpkit.Server]] = GeneratorServer

    def _prepared(self, ctx) -> SimpleNamespace:
        """The obfuscated tables and the encoded texts, once per run."""
        return ctx.prepared(self, lambda: self._prepare(ctx))

    def _prepare(self, ctx) -> SimpleNamespace:
        p, model = self.params, ctx.model
        if model is None or not model.causal:
            raise ValueError("obfuslm_generate needs a causal LM (smollm2-135m or tiny-causal) "
                             "as the spec's model")
        tables, metrics, sent = (obfuscate_model(ctx, model, p) if p.obfuscate else (None, {}, {}))
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
        tok = model.tokenizer
        specials = torch.tensor([-1 if t is None else client.special_obfuscated_id(t)
                                 for t in (tok.eos_token_id, tok.pad_token_id)])
        return SimpleNamespace(tables=tables, metrics=metrics, sent=sent, key=key, client=client,
                               train=train, validation=validation, specials=specials,
                               prompts=chosen[:, : p.prompt_tokens],
                               reference=chosen[:, p.prompt_tokens:])

    def releases(self, ctx) -> list[dpkit.Release]:
        """Tables ((k, ε)) when obfuscating; the padded id stream and the EOS / padding ids (∞)."""
        st = self._prepared(ctx)
        n_ids = int(st.train.mask.sum() + st.validation.mask.sum()) + st.prompts.numel()
        return [*releases(st.tables, self.params if self.params.obfuscate else None, n_ids, 0),
                dpkit.Release.uncovered("special_ids", SPECIALS_REASON, count=len(st.specials),
                                        unit="element")]

    def run(self, ctx) -> dpkit.DefenseResult:
        """Obfuscate (declared first), send; the server fine-tunes and completes the prompts; the
        client decodes and scores the completions and keeps the truth for the attacks."""
        declare_releases(self, ctx)
        wire = ctx.wire
        st = self._prepared(ctx)
        metrics, key = dict(st.metrics), st.key
        for name, tensor in st.sent.items():
            wire.send(name, tensor)
        wire.send("special_ids", st.specials)
        for phase, data in (("train", st.train), ("validation", st.validation)):
            wire.phase = phase
            wire.send("token_ids", padded_ids(data.ids, data.mask))
        wire.phase = "run"
        report = wire.send("fine_tune")
        curve = TrainingCurve.from_dict(report["curve"])
        metrics.update(train_loss=curve.final_train, train_s=float(report["train_s"]),
                       train_examples=float(len(st.train)),
                       validation_examples=float(len(st.validation)))
        wire.phase = "test"
        wire.send("token_ids", st.prompts)
        generated = wire.send("completions").cpu()
        metrics["rougeL_generation"] = rouge_l(list(key.decode(generated)),
                                               list(key.decode(st.reference)))
        metrics["decoded_example_chars"] = float(len(st.client.decode(generated[:1])[0]))
        sequences = torch.cat([st.prompts, generated], 1)
        result = dpkit.DefenseResult(metrics=metrics,
                                     truth={"token_ids": [key.decode(s) for s in sequences],
                                            "vocab_key": key.forward},
                                     wire_bytes=wire.summary())
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
