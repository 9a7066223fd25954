"""The untrusted side of DPED and PATE: the student, trained in the server process on what crossed.

The aggregator (the client: the private corpus, the teachers, the noise) sends three releases
(:mod:`dpkit_dped.releases`): every query's answered flag, and the noisy outputs and (DPED) noisy
hidden means of the answered queries. This server keeps them — they are what the attacks see —
and, when the client asks for the student, builds everything else from public inputs only: the
public corpus the params name (loaded here by name, checked by the runner to share no record with
the private data), its vocabulary, the public skip-gram (trained here; the client holds the same
one, trained with the seed :meth:`dpkit.RunContext.server_numpy_seed` gives it) and the noise plan
(from the params and the spec's δ). It post-processes the releases into targets
(:mod:`dpkit_dped.targets`), trains the student on Eq. 3 (:mod:`dpkit_dped.student`) and returns
it; the client's evaluator scores it against the private test split.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

import torch

import dpkit
from dpkit_dped.corpus import Vocabulary, build_vocabulary, sentences
from dpkit_dped.heldout import fission
from dpkit_dped.plans import calibrate
from dpkit_dped.privacy import NoisePlan
from dpkit_dped.releases import ANSWERS, HIDDEN, STUDENT, THRESHOLD
from dpkit_dped.skipgram import WordModel, cache_key, cached_models, train_gensim
from dpkit_dped.sources import texts_of
from dpkit_dped.student import train_student
from dpkit_dped.targets import hidden_targets, nonnegative, soft_targets

PUBLIC_STREAM = "dped-public"  # the public skip-gram's seed stream, on the server's seed


def gensim_settings(p, seed: int) -> dict:
    """Skip-gram hyper-parameters shared by teachers, the non-private and the public model."""
    return {"dim": p.dim, "window": p.window, "epochs": p.epochs, "negative": p.negative,
            "seed": seed % (2**31), "workers": p.workers}


def public_start(public: Any, p) -> tuple[Vocabulary, WordModel]:
    """(vocabulary, public skip-gram) of params ``p``, built in the server from public data alone
    (the skip-gram cached in the server's artifacts)."""
    data = public.load_dataset(p.public_data, dict(p.public_data_params))
    texts = texts_of(data, p.public_split, p.max_public_docs)
    vocab = build_vocabulary(texts, p.vocab_size, p.min_count)
    settings = gensim_settings(p, public.numpy_seed(PUBLIC_STREAM))
    key = cache_key("public", getattr(data, "fingerprint", p.public_data), p.public_split,
                    p.max_public_docs, p.vocab_size, p.min_count, settings)

    def build() -> list[WordModel]:
        public.say(f"training the public skip-gram on {len(texts)} documents")
        return [train_gensim(sentences(texts, vocab), vocab, component="public skip-gram",
                             **settings)]

    with public.artifact_lock("dped", key):
        model = cached_models(public.artifact_dir("dped", key), build)[0]
    return vocab, model.to(public.device)


def output_target(p, kept: torch.Tensor, outputs: torch.Tensor, plan: NoisePlan,
                  reference: WordModel, noise_scale: float = 1.0
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Labels (hard) or soft target rows of the answered queries ``kept``, from their received
    ``outputs`` alone (summed outputs whose noise std is ``noise_scale`` × the plan's), and which
    of them carry information."""
    if p.target == "hard":
        return outputs, torch.ones(len(kept), dtype=torch.bool, device=kept.device)
    prior = reference.context_logits(kept).softmax(dim=-1) if p.shrinkage == "wiener" else None
    target, informative = soft_targets(outputs, p.teachers, plan.sigma_votes * noise_scale, prior)
    return (nonnegative(target) if p.output_loss == "cross_entropy" else target), informative


def held_out_targets(p, kept: torch.Tensor, outputs: torch.Tensor, plan: NoisePlan,
                     reference: WordModel, generator: torch.Generator
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(scoring targets, fold-in targets or None) of the answers the student may hold out: soft
    answers are split by Gaussian data fission (:mod:`dpkit_dped.heldout`) into an unbiased half
    to score and a half post-processed as the training targets are, to fold in; hard labels are
    scored as they are, without fold-in."""
    if p.target == "hard":
        return outputs, None
    fold, score = fission(outputs / p.teachers, plan.sigma_votes / p.teachers, generator)
    return score, output_target(p, kept, fold * p.teachers, plan, reference,
                                noise_scale=2 ** 0.5)[0]


def hidden_target(p, kept: torch.Tensor, hidden_means: torch.Tensor | None, plan: NoisePlan,
                  reference: WordModel) -> tuple[torch.Tensor | None, torch.Tensor]:
    """The student's hidden targets of the answered queries ``kept`` (None without a hidden
    release) and which of them carry information."""
    if hidden_means is None:
        return None, torch.zeros(len(kept), dtype=torch.bool, device=kept.device)
    return hidden_targets(hidden_means, reference.vectors[kept], clip=p.clip,
                          noise_std=plan.sigma_hidden or 0.0, shrink=p.shrinkage == "wiener",
                          rescale=p.hidden_target == "public_norm")


class StudentServer(dpkit.Server):
    """DPED's server: keeps the three releases, trains the student on request."""

    uses_hidden: ClassVar[bool] = True

    @classmethod
    def public_data(cls, params: Any) -> list[tuple[str, dict]]:
        """The public corpus: vocabulary, public skip-gram (the student's start and prior)."""
        return [(params.public_data, dict(params.public_data_params))]

    def __init__(self, params: Any, public: dpkit.PublicInputs):
        super().__init__(params, public)
        self.releases: dict[str, torch.Tensor] = {}

    def keep(self, message: dpkit.Message) -> None:
        """Hold a release for the student and the attacks (each arrives once)."""
        if message.name in self.releases:
            raise ValueError(f"{message.name!r} arrived twice; the aggregator sends each release "
                             "once, for every query together")
        self.releases[message.name] = message.tensor
        self.observe(message.name, message.tensor)

    @dpkit.handles(THRESHOLD)
    def receive_threshold(self, message: dpkit.Message) -> None:
        """Every query's answered flag."""
        self.keep(message)

    @dpkit.handles(ANSWERS)
    def receive_answers(self, message: dpkit.Message) -> None:
        """The answered queries' noisy summed outputs (soft) or noisy labels (hard)."""
        self.keep(message)

    @dpkit.handles(HIDDEN)
    def receive_hidden(self, message: dpkit.Message) -> None:
        """DPED: the answered queries' noisy means of clipped teacher vectors."""
        self.keep(message)

    def received(self, name: str) -> torch.Tensor:
        """A release that must have arrived before the student is asked for."""
        if name not in self.releases:
            raise ValueError(f"the student was asked for before {name!r} arrived; send "
                             f"{THRESHOLD!r} and {ANSWERS!r} first")
        return self.releases[name]

    @dpkit.handles(STUDENT)
    def student(self, message: dpkit.Message) -> dict[str, Any]:
        """Train the student on what arrived (module docstring); return its tensors, training
        curve, epoch choice and how many targets carried information."""
        p, public = self.params, self.public
        plan = calibrate(p, self.uses_hidden, float(public.privacy.delta),
                         str(public.privacy.accountant))
        vocab, reference = public_start(public, p)
        kept = self.received(THRESHOLD).nonzero().squeeze(1)
        outputs = self.received(ANSWERS)
        hidden_means = self.releases.get(HIDDEN) if self.uses_hidden else None
        if self.uses_hidden and hidden_means is None and len(kept):
            raise ValueError(f"{HIDDEN!r} never arrived; DPED's student needs the hidden means")
        targets, informative_out = output_target(p, kept, outputs, plan, reference)
        held, fold = held_out_targets(p, kept, outputs, plan, reference,
                                      public.generator("dped-fission"))
        hidden, informative_hidden = hidden_target(p, kept, hidden_means, plan, reference)
        model = train_student(
            kept, hidden, targets, output_rows=informative_out, hidden_rows=informative_hidden,
            vocab_size=len(vocab), dim=p.dim, epochs=p.student_epochs, lr=p.student_lr,
            batch_size=p.student_batch, hidden_weight=getattr(p, "hidden_weight", 0.0),
            output_weight=getattr(p, "output_weight", 1.0), loss_kind=p.output_loss,
            generator=public.generator("dped-student"),
            init=reference if p.student_init == "public" else None,
            patience=p.student_patience, holdout_share=p.student_holdout_share,
            held_targets=held, fold_targets=fold, keep_start_level=p.student_keep_start_level,
            finish=p.student_finish)
        return {"vectors": model.vectors, "out_vectors": model.out_vectors,
                "out_bias": model.out_bias,
                "curve": None if model.curve is None else model.curve.to_dict(),
                "selection": None if model.selection is None else asdict(model.selection),
                "informative_outputs": float(informative_out.sum()),
                "informative_hidden": float(informative_hidden.sum())}


class PateStudentServer(StudentServer):
    """PATE's server: the same, on the outputs alone."""

    uses_hidden = False

