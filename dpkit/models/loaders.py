"""Loaders: word-vector tables -> EmbeddingSpace; Hugging Face folders / GGUF -> SplitModel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from dpkit.contract.context import cache_root
from dpkit.base.errors import DataSourceError
from dpkit.models.split import SplitModel
from dpkit.models.stopwords import ENGLISH_STOP_WORDS
from dpkit.text.space import EmbeddingSpace


def load_npy_space(name: str, vectors_path: Path, index_path: Path,
                   max_vocab: int | None = None) -> EmbeddingSpace:
    """A space from a ``[V, d]`` ``.npy`` table and a parquet word index (first ``max_vocab``)."""
    import pyarrow.parquet as pq

    table = np.load(vectors_path, mmap_mode="r", allow_pickle=False)
    # one thread, no read-ahead pool: Arrow's pools would outlive the read (in a fork server)
    index = pq.ParquetFile(index_path, pre_buffer=False).read(columns=["index"], use_threads=False)
    words = [str(word) for word in index.column("index").to_pylist()]
    if len(words) != table.shape[0]:
        raise DataSourceError(f"{name}: {len(words)} words in {index_path.name} but "
                              f"{table.shape[0]} rows in {vectors_path.name}; the artifact is "
                              "corrupt — delete its cache entry and fetch again")
    n = len(words) if max_vocab is None else min(max_vocab, len(words))
    vectors = torch.from_numpy(np.ascontiguousarray(table[:n], dtype=np.float32))
    return EmbeddingSpace(name if n == len(words) else f"{name}[:{n}]", words[:n], vectors,
                          lowercase=True, stop_words=ENGLISH_STOP_WORDS)


def load_word2vec_text(name: str, path: Path, max_vocab: int | None = None,
                       cache_key: str | None = None) -> EmbeddingSpace:
    """A space from a word2vec text file (header ``V d``), converted once to safetensors."""
    from safetensors.torch import load_file, save_file

    converted = cache_root() / "converted" / f"{cache_key}.safetensors" if cache_key else None
    if converted is not None and converted.is_file():
        vectors = load_file(str(converted))["vectors"]
        words = json.loads(converted.with_suffix(".tokens.json").read_text(encoding="utf-8"))
    else:
        words, vectors = _parse_word2vec_text(path)
        if converted is not None:
            converted.parent.mkdir(parents=True, exist_ok=True)
            tmp = converted.with_suffix(".tmp")
            converted.with_suffix(".tokens.json").write_text(json.dumps(words), encoding="utf-8")
            save_file({"vectors": vectors}, str(tmp))
            tmp.replace(converted)
    n = len(words) if max_vocab is None else min(max_vocab, len(words))
    lowercase = sum(w == w.lower() for w in words[:n]) >= 0.99 * n  # a few cased stragglers
    return EmbeddingSpace(name if n == len(words) else f"{name}[:{n}]", words[:n],
                          vectors[:n].contiguous(), lowercase=lowercase,
                          stop_words=ENGLISH_STOP_WORDS)


def _parse_word2vec_text(path: Path) -> tuple[list[str], torch.Tensor]:
    with open(path, encoding="utf-8") as f:
        rows, dim = (int(x) for x in f.readline().split())
        words, numbers = [], []
        for line in f:
            parts = line.rstrip("\n").split(" ")
            words.append(parts[0])
            numbers.append(" ".join(parts[1:]))
    flat = np.array(" ".join(numbers).split(), dtype=np.float32)
    if len(words) != rows or flat.size != rows * dim:
        raise DataSourceError(f"{path}: header says {rows}x{dim} but found {len(words)} rows and "
                              f"{flat.size} numbers; the file is truncated or corrupt")
    return words, torch.from_numpy(flat.reshape(rows, dim))


def is_causal_config(folder: Path) -> bool:
    """Whether a Hugging Face folder holds a causal LM (by its config's architectures)."""
    config = json.loads((folder / "config.json").read_text())
    return any(a.endswith("ForCausalLM") for a in config.get("architectures") or [])


def load_hf_split(name: str, folder: Path | str, device: torch.device | str = "cpu", *,
                  causal: bool | None = None, gguf_file: str | None = None,
                  lowercase: bool | None = None, max_length: int = 128) -> SplitModel:
    """A :class:`SplitModel` from a local Hugging Face folder (or a GGUF file inside it)."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    if gguf_file is None and not (folder / "config.json").is_file():
        raise DataSourceError(f"{name}: {folder} is not a Hugging Face model folder (no "
                              "config.json); pass the folder that holds config.json and weights")
    if causal is None:
        causal = True if gguf_file else is_causal_config(folder)
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(str(folder), **extra)
    cls = AutoModelForCausalLM if causal else AutoModel
    model = cls.from_pretrained(str(folder), dtype=torch.float32, **extra)
    if lowercase is None:
        lowercase = bool(getattr(tokenizer, "do_lower_case", False))
    if causal:
        tokenizer.padding_side = "right"
    return SplitModel(name, model, tokenizer, causal=causal, device=device, lowercase=lowercase,
                      stop_words=ENGLISH_STOP_WORDS, max_length=max_length)
