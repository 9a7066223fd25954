"""Your own corpus as a dataset: a local CSV, JSON Lines or Parquet file, or a Hugging Face
``datasets`` folder written by ``save_to_disk`` (when that library is installed).

Params are checked when a spec is validated (the file exists, is not empty, decodes, has the
columns), so a wrong path or column stops ``dpkit validate`` / ``dpkit run`` with exit 2 and the
file named, before any cell runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

import dpkit
from dpkit import (
    CatalogueEntry,
    DataSourceError,
    TextDataset,
    build_dataset,
    seeded_split,
    sha256_file,
)

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
           ".pq": "parquet"}
HEAD_BYTES = 1 << 16


def resolve_format(path: Path, declared: str) -> str:
    """The file's format: the declared one, or from its suffix (a folder is a ``datasets`` save)."""
    if declared != "auto":
        return declared
    if path.is_dir():
        return "hf"
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise ValueError(f"cannot tell the format of {path} from its suffix {path.suffix!r}; "
                         f"set format: csv, jsonl, parquet or hf") from None


def _decode(path: Path, raw: bytes, encoding: str) -> str:
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        if exc.start >= len(raw) - 4 and len(raw) == HEAD_BYTES:  # a character cut by the chunk
            return raw[:exc.start].decode(encoding)
        raise ValueError(f"{path} is not valid {encoding} (byte {exc.start}: "
                         f"{raw[exc.start:exc.start + 1]!r}); set encoding: latin-1 (or the "
                         "file's encoding)") from None
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r} for {path}") from None


def _head_columns(path: Path, fmt: str, encoding: str) -> list[str]:
    """Column names from the start of the file (raises ValueError naming the file)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            meta = pq.read_metadata(path)
        except Exception as exc:  # noqa: BLE001 — pyarrow raises several types for a bad file
            raise ValueError(f"{path} is not a readable Parquet file ({exc})") from None
        if meta.num_rows == 0:
            raise ValueError(f"{path} has no rows")
        return list(meta.schema.names)
    with path.open("rb") as f:
        head = _decode(path, f.read(HEAD_BYTES), encoding).lstrip("\ufeff")
    lines = [line for line in head.splitlines() if line.strip()]
    if fmt == "csv":
        import csv

        if len(lines) < 2:
            raise ValueError(f"{path} has no rows (a header and at least one row are needed)")
        return next(csv.reader([lines[0]]))
    if not lines:
        raise ValueError(f"{path} has no rows")
    try:
        first = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} line 1 is not JSON ({exc.msg}); JSON Lines has one object "
                         "per line") from None
    if not isinstance(first, dict):
        raise ValueError(f"{path} line 1 is a {type(first).__name__}, not a JSON object")
    return list(first)


class LocalFileParams(dpkit.Params):
    """Where the corpus is and which columns hold text, label and split."""

    path: str = Field(description="a .csv, .jsonl or .parquet file, or a save_to_disk folder")
    format: Literal["auto", "csv", "jsonl", "parquet", "hf"] = "auto"
    text_column: str = "text"
    label_column: str | None = Field(None, description="labels (any strings); none: unlabelled")
    split_column: str | None = Field(None, description="train / test per row; none: a seeded "
                                     "split by test_fraction")
    test_fraction: float = Field(0.2, gt=0.0, lt=1.0)
    encoding: str = "utf-8"
    max_examples: int | None = Field(None, ge=1, description="keep at most this many per split")
    seed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _file_is_usable(self):
        path = Path(self.path).expanduser()
        if not path.exists():
            raise ValueError(f"{path.resolve()} does not exist (a relative path in a spec is "
                             "read from the spec's folder, or with paths_relative_to: cwd from "
                             "where dpkit runs)")
        fmt = resolve_format(path, self.format)
        if fmt == "hf":
            columns = _hf_columns(path)
        elif path.is_dir():
            raise ValueError(f"{path} is a folder; give a file, or format: hf for a datasets save")
        elif path.stat().st_size == 0:
            raise ValueError(f"{path} is empty")
        else:
            columns = _head_columns(path, fmt, self.encoding)
        for role in ("text_column", "label_column", "split_column"):
            wanted = getattr(self, role)
            if wanted is not None and wanted not in columns:
                raise ValueError(f"{path} has no column {wanted!r} ({role}); its columns: "
                                 f"{', '.join(map(str, columns))}")
        return self


def _hf_columns(path: Path) -> list[str]:
    """Feature names of a ``save_to_disk`` folder (a Dataset, or every split of a DatasetDict)."""
    if importlib.util.find_spec("datasets") is None:
        raise ValueError(f"{path} is a Hugging Face datasets folder, which needs the `datasets` "
                         "library: pip install datasets")
    infos = [path / "dataset_info.json"] if (path / "dataset_info.json").exists() else \
        sorted(path.glob("*/dataset_info.json"))
    if not infos:
        raise ValueError(f"{path} is not a folder written by datasets' save_to_disk (no "
                         "dataset_info.json)")
    columns = [set(json.loads(info.read_text(encoding="utf-8")).get("features") or {})
               for info in infos]
    shared = set.intersection(*columns) | ({"__split__"} if len(infos) > 1 else set())
    return sorted(shared)


def _read_table(path: Path, fmt: str, encoding: str):
    """The whole file as a pandas DataFrame of strings."""
    import pandas as pd

    try:
        if fmt == "csv":
            return pd.read_csv(path, dtype=str, keep_default_na=False, encoding=encoding)
        if fmt == "jsonl":
            return pd.read_json(path, lines=True, dtype=False, encoding=encoding)
        if fmt == "parquet":
            return pd.read_parquet(path)
        from datasets import DatasetDict, concatenate_datasets, load_from_disk

        saved = load_from_disk(str(path))
        if isinstance(saved, DatasetDict):
            parts = [d.add_column("__split__", [name] * len(d)) for name, d in saved.items()]
            return concatenate_datasets(parts).to_pandas()
        return saved.to_pandas()
    except UnicodeDecodeError as exc:
        raise DataSourceError(f"{path} is not valid {encoding} (byte {exc.start}); set "
                              "encoding: latin-1 (or the file's encoding)") from None
    except ValueError as exc:
        raise DataSourceError(f"{path} could not be read as {fmt}: {exc}") from None


class LocalFiles(CatalogueEntry):
    """Your own labelled corpus from a local file (CSV, JSON Lines, Parquet, datasets folder)."""

    name: ClassVar[str] = "local_files"
    kind: ClassVar[str] = "text classification"
    size: ClassVar[str] = "yours"
    inner: ClassVar[str] = "a local file (params.path)"
    reads_files: ClassVar[bool] = True  # dpkit budget cap FILE identifies a file through it
    Params: ClassVar[type[dpkit.Params]] = LocalFileParams

    def content_fingerprint(self) -> tuple[str, str]:
        """sha256 of the file (of every file, by relative path, in a datasets folder)."""
        path = Path(self.params.path).expanduser().resolve()
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        h = hashlib.sha256()
        for f in files:
            h.update(str(f.relative_to(path) if path.is_dir() else f.name).encode() + b"\0")
            h.update(sha256_file(f, progress=False).encode())
        return h.hexdigest(), f"{path} ({len(files)} file{'s' * (len(files) != 1)}, sha256)"

    def load(self) -> TextDataset:
        """Texts, labels and splits of the file (seeded split when it has no split column)."""
        p = self.params
        path = Path(p.path).expanduser()
        fmt = resolve_format(path, p.format)
        df = _read_table(path, fmt, p.encoding)
        split_column = p.split_column or ("__split__" if "__split__" in df.columns else None)
        if len(df) == 0:
            raise DataSourceError(f"{path} has no rows")
        missing = [c for c in (p.text_column, p.label_column, split_column)
                   if c is not None and c not in df.columns]
        if missing:
            raise DataSourceError(f"{path} has no column {missing[0]!r}; its columns: "
                                  f"{', '.join(map(str, df.columns))}")
        texts = [_text(v, path, i) for i, v in enumerate(df[p.text_column])]
        labels = None if p.label_column is None else [str(v) for v in df[p.label_column]]
        names = None if labels is None else tuple(sorted(set(labels)))
        source = f"{path.resolve()} ({fmt})"
        if split_column is None:
            train, test = seeded_split(len(texts), p.test_fraction, p.seed)
            raw = {"train": _pick(train, texts, labels), "test": _pick(test, texts, labels)}
            source += f"; seeded {1 - p.test_fraction:g}/{p.test_fraction:g} split (seed {p.seed})"
        else:
            values = [str(v) for v in df[split_column]]
            found = sorted(set(values))
            if not {"train", "test"} <= set(found):
                raise DataSourceError(f"{path}: split column {split_column!r} has values "
                                      f"{found}; dpkit's tasks read 'train' and 'test'")
            raw = {s: _pick([i for i, v in enumerate(values) if v == s], texts, labels)
                   for s in found}
        return build_dataset(self.name, raw, names, p.max_examples, p.seed, source)


def _text(value, path: Path, row: int) -> str:
    if not isinstance(value, str):
        raise DataSourceError(f"{path} row {row + 1}: the text is {value!r}, not a string")
    return value


def _pick(index, texts: list[str], labels: list[str] | None):
    return [texts[i] for i in index], None if labels is None else [labels[i] for i in index]

