"""EmbedCluster + WeightSynth on the MiniLM vocabulary (30,522×384): time and peak memory.

Run: ``python -m bench.obfuslm_cluster [--table model.safetensors] [--k 10] [--beta 0.99]``.
Without ``--table`` the table comes from the registered ``minilm`` model (fetched once).
Prints seconds, peak resident memory, the ratio of the clustering time to one plain V×V GEMM of
the same shape, and the achieved k; writes JSON to ``bench/results/obfuslm_cluster.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import torch


def load_table(path: str | None) -> torch.Tensor:
    """The MiniLM input-embedding table, from a safetensors file or the ``minilm`` model source."""
    if path:
        from safetensors.torch import load_file

        tensors = load_file(path)
        key = next(k for k in tensors if k.endswith("word_embeddings.weight"))
        return tensors[key].float()
    from dpkit.contract.plugins import get_registry

    model = get_registry().build("model", "minilm", {}).load(torch.device("cpu"))
    return model.embedding_table.float().clone()


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    """Time clustering and synthesis; print and save the numbers."""
    from dpkit_obfuslm.cluster import embed_cluster
    from dpkit_obfuslm.synth import weight_synth

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--table")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--beta", type=float, default=0.99)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", default="bench/results/obfuslm_cluster.json")
    args = ap.parse_args()
    table = load_table(args.table)
    rss_loaded = peak_rss_mb()
    perm = torch.randperm(table.shape[0], generator=torch.Generator().manual_seed(0))
    table = table[perm].contiguous()

    start = time.perf_counter()
    unit = torch.nn.functional.normalize(table, dim=1)
    for lo in range(0, unit.shape[0], 1024):
        (unit[lo:lo + 1024] @ unit.T).max()
    gemm_s = time.perf_counter() - start

    start = time.perf_counter()
    clusters = embed_cluster(table, args.k, args.beta)
    cluster_s = time.perf_counter() - start
    start = time.perf_counter()
    weights = weight_synth(table, clusters, args.epsilon, torch.Generator().manual_seed(1))
    obfuscated = weights.apply(table)
    synth_s = time.perf_counter() - start
    result = {
        "vocab": int(table.shape[0]), "dim": int(table.shape[1]), "k": args.k, "beta": args.beta,
        "threads": torch.get_num_threads(), "cluster_s": round(cluster_s, 2),
        "synth_s": round(synth_s, 2), "gemm_only_s": round(gemm_s, 2),
        "cluster_over_gemm": round(cluster_s / gemm_s, 2),
        "peak_rss_mb": round(peak_rss_mb(), 1), "rss_after_load_mb": round(rss_loaded, 1),
        "clusters": int(clusters.members.shape[0]), "k_achieved": clusters.k_achieved,
        "share_below_k": round(clusters.share_below_k, 4),
        "rows_changed": int((obfuscated != table).any(1).sum()),
    }
    for key, value in result.items():
        print(f"{key:>18}: {value}")
    print(f"target: clustering ≤ 60 s and peak ≤ 2048 MiB -> "
          f"{'met' if cluster_s <= 60 and result['peak_rss_mb'] <= 2048 else 'NOT met'}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
