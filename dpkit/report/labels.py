"""Names a person reads for metric keys and swept parameters, on plot axes and in legends, and
which way each metric is better (:func:`direction`)."""

from __future__ import annotations

import math
import re

NAMES = {
    "accuracy": "accuracy of a classifier on the privatized text",
    "auc": "AUC (utility)",
    "perplexity": "perplexity on held-out private text (lower is better)",
    "token_preservation": "share of tokens kept",
    "inversion_cosine_top1": "inversion attack: top-1 recovery (cosine)",
    "knn_top1": "KNN+ attack: top-1 token recovery",
    "ep": "attack: empirical privacy (EP)",
    "rougeL_generation": "ROUGE-L of generations",
    "clean_accuracy": "accuracy on the clean (unprivatized) text",
    "mse": "MSE to the clean embedding",
    "cosine": "cosine similarity to the clean embedding",
    "attribute_accuracy": "attribute inference attack: accuracy",
    "mi": "k-NN mutual information between clean and sent tokens",
}
PATTERNS = (
    (re.compile(r"^recovery_at(\d+)$"), "token recovery attack: Pr@{0} (original word in top {0})"),
    (re.compile(r"^inversion_top(\d+)$"), "embedding inversion attack: top-{0} recovery"),
    (re.compile(r"^inversion_cosine_top(\d+)$"), "embedding inversion attack (cosine): top-{0} "
     "recovery"),
    (re.compile(r"^(\w+?)_top(\d+)$"), "{0} attack: top-{1} token recovery"),
)
GUARANTEES = {
    "eta_per_token": "η per token — metric DP, ε = η·d(x, x′)",
    "eta_per_sequence": "η per sequence — metric DP, ε = η·d(x, x′)",
    "epsilon": "ε — (ε, δ)-DP at δ = {delta:g}",
    "k_achieved": "k achieved — (k, ε)-anonymity",
}


def metric_label(name: str) -> str:
    """``recovery_at5`` → ``token recovery attack: Pr@5 (…)``; unknown keys keep their name."""
    if name in NAMES:
        return NAMES[name]
    for pattern, text in PATTERNS:
        match = pattern.match(name)
        if match:
            return text.format(*match.groups())
    return name.replace("_", " ")


def axis_label(name: str, agg: list[dict], delta: float, swept: bool) -> str:
    """A swept parameter named with the guarantee it sets, where its values are one ledger
    number's in every row (``eta`` → ``eta: η per token — metric DP, ε = η·d(x, x′)``); a metric
    named for people."""
    if not swept:
        return metric_label(name)
    for key, text in GUARANTEES.items():
        pairs = [(r["point"].get(name), r["values"].get(key)) for r in agg]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        if pairs and all(_close(a, b) for a, b in pairs):
            return f"{name}: {text.format(delta=delta)}"
    if "epsilon" in name:
        return f"{name} (the ε the method is calibrated to; ledger ε in the table)"
    return name


def spans_orders(values: list[float], ratio: float = 100.0) -> bool:
    """Whether positive values span more than ``ratio`` (then a log axis shows them)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > ratio


def _close(a, b) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-6)
    except (TypeError, ValueError):
        return False


HIGHER, LOWER, ATTACK = "higher is better", "lower is better", \
    "attack success: higher is worse for privacy"
DIRECTIONS = {
    "accuracy": HIGHER, "clean_accuracy": HIGHER, "auc": HIGHER, "f1": HIGHER,
    "token_preservation": HIGHER, "cosine": HIGHER, "rougeL_generation": HIGHER,
    "ep": "higher is more private", "token_corr": LOWER + " for privacy (leakage)",
    "perplexity": LOWER, "mse": LOWER, "epoch_seconds": LOWER, "epoch_cpu_seconds": LOWER,
    "attribute_accuracy": ATTACK, "mi": ATTACK.replace("attack success", "leakage"),
    "toy_top1": ATTACK,
}
DIRECTION_PATTERNS = (
    (re.compile(r"^recovery_at\d+$|_top\d+$"), ATTACK),
    (re.compile(r"^mutual_info"), ATTACK.replace("attack success", "leakage")),
    (re.compile(r"^perplexity"), LOWER),
    (re.compile(r"^bytes_"), LOWER + " (cost)"),
    (re.compile(r"_accuracy$|_auc$|^rouge"), HIGHER),
)


def direction(name: str) -> str | None:
    """Which way ``name`` is better, in words (``higher is better``; for an attack's success rate
    ``attack success: higher is worse for privacy``); None when dpkit does not know."""
    if name in DIRECTIONS:
        return DIRECTIONS[name]
    for prefix in ("clean_", "chance_"):  # a reference level reads like its metric
        if name.startswith(prefix):
            return direction(name[len(prefix):])
    for pattern, words in DIRECTION_PATTERNS:
        if pattern.search(name):
            return words
    return None


def arrow(name: str) -> str:
    """``↑`` where a higher value is better, ``↓`` where lower is (an attack's success rate:
    lower is better for privacy), nothing where unknown."""
    words = direction(name)
    if words is None:
        return ""
    return "↑" if words.startswith(("higher is better", "higher is more")) else "↓"
