"""Where DPED's data come from: the private corpus, the public corpus, benchmarks, a labelled corpus.

Everything is loaded through the run context's dataset registry. The three word benchmarks fall
back to the copies inside the installed gensim wheel (the same files dpkit's catalogue pins) when
no dataset of that name is registered.
"""

from __future__ import annotations

from pathlib import Path

from dpkit import Analogies, TextDataset, WordPairs

_GENSIM_FILES = {"wordsim353": "wordsim353.tsv", "simlex999": "simlex999.txt",
                 "analogies": "questions-words.txt"}


def texts_of(dataset: TextDataset, split: str, limit: int | None = None) -> list[str]:
    """Texts of ``split`` (the first ``limit`` of them when given)."""
    texts = list(dataset[split].texts)
    return texts[:limit] if limit else texts


def read_word_pairs(path: Path, name: str) -> WordPairs:
    """A tab-separated ``word1 word2 score`` file with ``#`` comments."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.strip().split("\t")
        if len(parts) >= 3 and not line.startswith("#"):
            pairs.append((parts[0].lower(), parts[1].lower(), float(parts[2])))
    return WordPairs(name, pairs, str(path))


def read_analogies(path: Path) -> Analogies:
    """The ``questions-words.txt`` format: ``: section`` headers, then ``a b c d`` lines."""
    sections: dict[str, list[tuple[str, str, str, str]]] = {}
    current = "default"
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(":"):
            current = line[1:].strip()
        elif len(line.split()) == 4:
            a, b, c, d = line.lower().split()
            sections.setdefault(current, []).append((a, b, c, d))
    return Analogies("analogies", str(path), sections)


def load_benchmark(ctx, name: str):
    """``wordsim353`` / ``simlex999`` (WordPairs) or ``analogies`` (Analogies)."""
    if ctx is not None and name in ctx.registry.names("dataset"):
        data = ctx.load_dataset(name)
        if isinstance(data, Analogies) and not data.sections and data.path:
            return read_analogies(Path(data.path))
        if isinstance(data, (WordPairs, Analogies)):
            return data
    from gensim.test.utils import datapath

    path = Path(datapath(_GENSIM_FILES[name]))
    return read_analogies(path) if name == "analogies" else read_word_pairs(path, name)


def all_analogy_questions(analogies: Analogies) -> list[tuple[str, str, str, str]]:
    """Every question of every section, lowercased."""
    return [tuple(w.lower() for w in q) for qs in analogies.sections.values() for q in qs]
