"""Your own corpus as a dataset: a local CSV, JSON Lines or Parquet file, or a Hugging Face
``datasets`` folder written by ``save_to_disk`` (when that library is installed).

Params are checked when a spec is validated (the file exists, is not empty, decodes, has the
columns), so a wrong path or column stops ``dpkit validate`` / ``dpkit run`` with exit 2 and the
file named, before any cell runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar


import dpkit
from dpkit import (
    CatalogueEntry,
    DataSourceError,
    TextDataset,
    build_dataset,
    seeded_split,
)
from dpkit_datasets.params import LocalFileParams, resolve_format


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

