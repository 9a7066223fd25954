"""Choose DP-SGD's step count per target ε on public data only (never the private test split).

``python -m dpkit_dped.tune_steps --epsilons 1 4 16 --candidates 500 1000 2000`` runs, for each
target ε and each candidate step count T (ascending), DP-SGD on the **public** corpus's train split
with the noise multiplier z(ε, T) calibrated for the *private* run (same q, same δ) and the
expected batch size of the private run, and scores the public test split's held-out skip-gram
loss. With ``--init public`` (the default, as the spec's DP-SGD) the pilot mirrors public
pre-training + private fine-tuning on public data alone: a skip-gram trained on one half of the
public train split is fine-tuned with DP-SGD on the other half. Candidates stop once one is no
better than the previous by 0.5 %; the best T per ε is printed as the ``steps_by_epsilon``
mapping for ``specs/dped.yaml``. Nothing private is read except the
*number* of private training documents (which sets the private batch size).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np
import torch

import dpkit
from dpkit import calibrate_noise, converged, dpsgd_event
from dpkit_dped.corpus import (
    build_vocabulary,
    document_tensor,
    encode,
    sentences,
    skipgram_pairs,
)
from dpkit_dped.evaluation import perplexity
from dpkit_dped.pipeline import split_validation
from dpkit_dped.sgd import train_dpsgd_documents
from dpkit_dped.skipgram import train_gensim
from dpkit_dped.sources import texts_of

STOP_GAIN = 0.005
VALIDATION_SHARE = 0.05  # the cells' default: private training documents set aside


def pilot_loss(tokens, lengths, neg_probs, validation, *, z: float, rate: float, steps: int,
               args, seed: int, init=None) -> tuple[float, bool]:
    """Public validation log perplexity after ``steps`` DP-SGD steps, and whether its curve converged."""
    model = train_dpsgd_documents(tokens, lengths, neg_probs, pairs_per_doc=args.pairs_per_doc,
                        window=args.window, dim=args.dim, negatives=5, noise_multiplier=z,
                        max_grad_norm=1.0, sampling_rate=rate, steps=steps, lr=args.lr,
                        generator=torch.Generator().manual_seed(seed), validation=validation,
                        curve_points=10, optimizer=args.optimizer, init=init)
    return math.log(perplexity(model, *validation)), converged(model.curve)


def choose_steps(args) -> dict[float, int]:
    """The tuned step count per target ε (and prints every pilot)."""
    public = dpkit.load_dataset(args.public_data)
    private_docs = args.private_docs or round(
        (1 - VALIDATION_SHARE) * len(dpkit.load_dataset("20newsgroups")["train"].texts))
    train_texts = texts_of(public, "train")
    vocab = build_vocabulary(train_texts, args.vocab_size, 5)
    rng = np.random.default_rng(0)
    validation = skipgram_pairs(encode(texts_of(public, "test"), vocab), args.window, 5000, rng)
    init = None
    if args.init == "public":  # the proxy: pre-train on one half of the public corpus
        pretrain, train_texts = split_validation(train_texts, 0.5, 0)
        init = train_gensim(sentences(pretrain, vocab), vocab, dim=args.dim, window=args.window,
                            epochs=5, negative=5, seed=0)
        print(f"public proxy: pre-trained on {len(pretrain)} public documents, fine-tuning on "
              f"{len(train_texts)}; pre-trained loss {math.log(perplexity(init, *validation)):.4f}")
    tokens, lengths = document_tensor(encode(train_texts, vocab), 1000)
    counts = torch.tensor(vocab.counts, dtype=torch.float32) ** 0.75
    pilot_rate = min(1.0, args.sampling_rate * private_docs / len(tokens))
    print(f"public pilot: {len(tokens)} documents at q={pilot_rate:.4f} "
          f"(≈{args.sampling_rate * private_docs:.0f} per batch, as the private run); "
          f"uniform loss = {math.log(len(vocab)):.3f}")
    chosen = {}
    for eps in args.epsilons:
        best, previous = None, math.inf
        for steps in sorted(args.candidates):
            z = calibrate_noise(lambda s, t=steps: dpsgd_event(s, args.sampling_rate, t), eps,
                                args.delta, "rdp")
            started = time.perf_counter()
            loss, ok = pilot_loss(tokens, lengths, counts / counts.sum(), validation, z=z,
                                  rate=pilot_rate, steps=steps, args=args, seed=0, init=init)
            print(f"  ε={eps:g} T={steps}: z={z:.3f} public val loss {loss:.4f} "
                  f"(converged {ok}) [{time.perf_counter() - started:.0f} s]", flush=True)
            if best is None or loss < best[0]:
                best = (loss, steps)
            if loss > previous * (1 - STOP_GAIN):
                break
            previous = loss
        chosen[eps] = best[1]
    print("steps_by_epsilon:", json.dumps({str(k): v for k, v in chosen.items()}))
    return chosen


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", required=True)
    parser.add_argument("--candidates", type=int, nargs="+", default=[250, 500, 1000, 2000])
    parser.add_argument("--sampling-rate", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    parser.add_argument("--init", choices=["random", "public"], default="public",
                        help="public: pre-train on half the public corpus, fine-tune on the rest")
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--pairs-per-doc", type=int, default=32)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--vocab-size", type=int, default=3000)
    parser.add_argument("--public-data", default="news_articles")
    parser.add_argument("--private-docs", type=int, default=None,
                        help="private training documents (default: 20 Newsgroups train, 95 %%)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    choose_steps(args)


if __name__ == "__main__":
    main()
