"""The server part of the ObfusLM defenses, built in its own process from public inputs only.

The runner builds it from the defense's params (public: they are in the spec) and the spec's
model, loaded here by name. It installs the obfuscated tables it receives (for ObfusLM+ also every
other transformed parameter) in its own copy of the public model, keeps the id streams and labels
it receives per phase (``train``, ``validation``, ``test``), fine-tunes when the client asks, and
answers the client's inference requests: predicted labels (classification) or generated ids
(generation), which only the client can map back to tokens.

The attacks run here, on :meth:`ObfusServer.view` — the table the server holds (after its own
fine-tuning) and the documents it received, as obfuscated ids — and
:meth:`ObfusServer.knowledge`: the public model's original table and special ids, a public corpus
tokenized with the public tokenizer (the dataset the spec names, which the runner checked shares
no record with the private data) and the algorithm's public parameters.
"""

from __future__ import annotations

import copy
import time
from typing import Any, ClassVar

import torch

import dpkit
from dpkit_obfuslm.classify import Encoded, EncoderClassifier, fine_tune, predict
from dpkit_obfuslm.client import ObfusClient
from dpkit_obfuslm.common import layer_params, obfuscation_knowledge, received_ids, table_params
from dpkit_obfuslm.lora import lora_fine_tune
from dpkit_obfuslm.obfuscate import VocabKey


class ObfusServer(dpkit.Server):
    """What both ObfusLM servers share: the model copy, what they receive, the attacks' inputs."""

    causal: ClassVar[bool] = False

    @classmethod
    def public_data(cls, params: Any) -> list[tuple[str, dict]]:
        """The attacker's public corpus, when the spec names one."""
        name = getattr(params, "public_dataset", None)
        return [] if name is None else [(name, dict(params.public_params))]

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.split = public.model
        if self.split is None or getattr(self.split, "causal", None) is not self.causal:
            kind = "a causal LM (smollm2-135m, tiny-causal)" if self.causal else \
                "an encoder model (minilm, tiny-encoder)"
            raise ValueError(f"{type(self).__name__} needs {kind} as the spec's model")
        self.model = copy.deepcopy(self.split.server)
        self.ids: dict[str, Encoded] = {}
        self.labels: dict[str, torch.Tensor] = {}
        self._knowledge: dict[str, Any] | None = None

    @dpkit.handles("tables")
    def receive_tables(self, message: dpkit.Message) -> None:
        """The obfuscated input table (and untied LM head), ``[n, V, d]``: install them."""
        targets, received = table_params(self.model), message.tensor
        if received.ndim != 3 or received.shape[0] != len(targets) or \
                received.shape[1:] != targets[0].shape:
            raise ValueError(f"tables of shape {tuple(received.shape)} do not fit the public "
                             f"model's {len(targets)} table(s) of shape {tuple(targets[0].shape)}")
        with torch.no_grad():
            for target, table in zip(targets, received):
                target.copy_(table.to(target.device, target.dtype))

    @dpkit.handles("hidden_layers")
    def receive_layers(self, message: dpkit.Message) -> None:
        """ObfusLM+: every other parameter of the transformed model, flat: install them."""
        params = layer_params(self.model)
        sizes = [q.numel() for q in params]
        if message.tensor.numel() != sum(sizes):
            raise ValueError(f"hidden_layers carries {message.tensor.numel()} values; the public "
                             f"model's other parameters hold {sum(sizes)}")
        with torch.no_grad():
            for q, part in zip(params, message.tensor.split(sizes)):
                q.copy_(part.view_as(q).to(q.device, q.dtype))

    @dpkit.handles("token_ids")
    def receive_ids(self, message: dpkit.Message) -> None:
        """One phase's (obfuscated) id stream, padded: keep ids and attention mask."""
        if message.phase in self.ids:
            raise ValueError(f"token_ids of phase {message.phase!r} arrived twice; send each "
                             "phase's texts in one message")
        self.ids[message.phase] = Encoded(*received_ids(message))

    @dpkit.handles("labels")
    def receive_labels(self, message: dpkit.Message) -> None:
        """One phase's task labels."""
        self.labels[message.phase] = message.tensor.long()

    def received(self, phase: str, labelled: bool = False) -> Encoded:
        """The texts of ``phase`` as received (with their labels when ``labelled``)."""
        if phase not in self.ids:
            raise ValueError(f"{type(self).__name__}: no token_ids of phase {phase!r} arrived; "
                             f"the client sent {sorted(self.ids)}")
        data = self.ids[phase]
        if not labelled:
            return data
        labels = self.labels.get(phase)
        if labels is None or len(labels) != len(data):
            raise ValueError(f"{type(self).__name__}: phase {phase!r} has {len(data)} texts and "
                             f"{'no' if labels is None else len(labels)} labels")
        return Encoded(data.ids, data.mask, labels)

    def table(self) -> torch.Tensor:
        """The input table the server holds now."""
        return self.model.get_input_embeddings().weight.detach()

    def knowledge(self) -> dict[str, Any]:
        """The public table and special ids, the public corpus as original ids, the parameters."""
        if self._knowledge is None:
            p = self.params
            public_ids: list[torch.Tensor] = []
            name = getattr(p, "public_dataset", None)
            if name is not None:
                data = self.public.load_dataset(name, dict(p.public_params))
                split = "train" if "train" in data.splits else next(iter(data.splits))
                texts = list(data[split].texts[:p.public_max])
                tokenizer = ObfusClient(self.split, VocabKey.identity(self.split.vocab_size),
                                        p.max_length)
                public_ids = tokenizer.original_ids(texts).documents() if texts else []
            self._knowledge = {"original_table": self.split.embedding_table.float(),
                               "public_token_ids": public_ids,
                               "special_ids": self.split.special_token_ids(),
                               "obfuscation": obfuscation_knowledge(p)}
        return self._knowledge


class ClassifierServer(ObfusServer):
    """Fine-tunes the (obfuscated) encoder plus a head on what it received; predicts test labels."""

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.classifier: EncoderClassifier | None = None

    @dpkit.handles("fine_tune")
    def fine_tune(self, message: dpkit.Message) -> dict[str, Any]:
        """Train on the received training texts, validate on the validation texts; the curve."""
        p, public = self.params, self.public
        train = self.received("train", labelled=True)
        validation = self.received("validation", labelled=True) if "validation" in self.ids \
            else None
        seen = torch.cat([train.labels, *([] if validation is None else [validation.labels])])
        classifier = EncoderClassifier(self.model, self.split.hidden_size, int(seen.max()) + 1,
                                       p.precision).to(public.device)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(public.numpy_seed("obfuslm.head"))
            classifier.head.reset_parameters()
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[]):  # the body's dropout draws from the global RNG
            torch.manual_seed(public.numpy_seed("obfuslm.dropout"))
            curve = fine_tune(classifier, train, epochs=p.epochs, batch_size=p.batch_size,
                              lr=p.lr, head_lr=p.head_lr, generator=public.generator("obfuslm.train"),
                              say=public.say, validation=validation, patience=p.patience,
                              stop_on=p.stop_on, group_by_length=p.group_by_length,
                              validate_every=p.validate_every)
        self.classifier = classifier
        return {"curve": curve.to_dict(), "train_s": time.perf_counter() - started}

    @dpkit.handles("predictions")
    def predictions(self, message: dpkit.Message) -> torch.Tensor:
        """Predicted labels of the received test texts."""
        if self.classifier is None:
            raise ValueError("predictions were requested before fine_tune")
        return predict(self.classifier, self.received("test"))

    def view(self) -> dict[str, Any]:
        """The (fine-tuned) table and the first ``attack_docs`` documents received, in order."""
        docs = [doc for data in self.ids.values() for doc in data.documents()]
        return {"obfuscated_table": self.table(), "token_ids": docs[:self.params.attack_docs]}


class GeneratorServer(ObfusServer):
    """LoRA-fine-tunes the (obfuscated) causal LM and completes the prompts it received."""

    causal = True

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.stop: dict[str, int | None] = {"eos_token_id": None, "pad_token_id": None}
        self.sequences: torch.Tensor | None = None

    @dpkit.handles("special_ids")
    def special_ids(self, message: dpkit.Message) -> None:
        """The client's ids of EOS and padding (−1: none), to stop and pad generation."""
        eos, pad = (int(i) for i in message.tensor.tolist())
        self.stop = {"eos_token_id": eos if eos >= 0 else None,
                     "pad_token_id": pad if pad >= 0 else None}

    @dpkit.handles("fine_tune")
    def fine_tune(self, message: dpkit.Message) -> dict[str, Any]:
        """LoRA on the received training texts, validated on the validation texts; the curve."""
        train = self.received("train")
        validation = self.received("validation") if "validation" in self.ids else None
        started = time.perf_counter()
        with torch.random.fork_rng(devices=[]):  # LoRA's initialisation draws from the global RNG
            torch.manual_seed(self.public.numpy_seed("obfuslm.lora-init"))
            self.model, curve = lora_fine_tune(self.model, train.ids, train.mask, self.params,
                                               self.public.generator("obfuslm.lora"),
                                               self.public.device, validation)
        return {"curve": curve.to_dict(), "train_s": time.perf_counter() - started}

    @dpkit.handles("completions")
    def completions(self, message: dpkit.Message) -> torch.Tensor:
        """Greedy completions ``[n, new_tokens]`` of the received test prompts."""
        prompts = self.received("test").ids.to(self.public.device)
        with torch.no_grad():
            out = self.model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                                      max_new_tokens=self.params.new_tokens, do_sample=False,
                                      **self.stop)
        self.sequences = out.cpu()
        return out[:, prompts.shape[1]:].cpu()

    def view(self) -> dict[str, Any]:
        """The table and every prompt with the server's own completion, as obfuscated ids."""
        docs = [] if self.sequences is None else list(self.sequences)
        return {"obfuscated_table": self.table(), "token_ids": docs}
