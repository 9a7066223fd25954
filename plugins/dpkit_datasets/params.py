"""Parameters of the built-in datasets: pydantic, dpkit and the standard library only.

``dpkit validate`` reads them without loading any corpus; a local file's params check that the
file exists, decodes and has the columns named (reading only its first 64 KiB).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

import dpkit


class CorpusParams(dpkit.Params):
    """Deterministic subsampling (per split) for quick runs."""

    max_examples: int | None = Field(None, ge=1, description="keep at most this many per split")
    seed: int = Field(0, ge=0, description="seed of the subsample (and of the split, if seeded)")


class SplitParams(CorpusParams):
    """Subsampling plus the seeded train/test split of a corpus without an official one."""

    test_fraction: float = Field(0.2, gt=0.0, lt=1.0, description="share of the test split")


class RottenTomatoesParams(SplitParams):
    """Rotten Tomatoes options."""

    include_plot: bool = Field(False, description="keep plot summaries as a third class")


class NewsArticlesParams(SplitParams):
    """News articles options."""

    with_title: bool = Field(True, description="prefix each article with its title")


class MoviePolarityParams(SplitParams):
    """Movie review polarity options."""

    variant: Literal["sentences", "reviews"] = Field(
        "sentences", description="4,000 sentences (pang&lee2) or 1,500 full reviews (pang&lee1)")


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
