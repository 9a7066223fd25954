"""Built-in datasets: real corpora and word benchmarks from pinned artifacts, and your own local files.

Registered by reference: building the registry imports only :mod:`dpkit_datasets.params`; the
classes load on first use.
"""

import dpkit

DATASETS = {
    "20newsgroups": ("catalogue:Newsgroups20", "CorpusParams"),
    "reuters_r8": ("catalogue:ReutersR8", "CorpusParams"),
    "reuters_r52": ("catalogue:ReutersR52", "CorpusParams"),
    "rotten_tomatoes": ("catalogue:RottenTomatoes", "RottenTomatoesParams"),
    "tweets_sentiment": ("catalogue:TweetsSentiment", "SplitParams"),
    "news_articles": ("catalogue:NewsArticles", "NewsArticlesParams"),
    "movie_polarity": ("catalogue:MoviePolarity", "MoviePolarityParams"),
    "wordsim353": ("catalogue:WordSim353", None),
    "simlex999": ("catalogue:SimLex999", None),
    "analogies": ("catalogue:GoogleAnalogies", None),
    "local_files": ("local:LocalFiles", "LocalFileParams"),
}
"""Dataset name -> (module:Class in this package, its Params in dpkit_datasets.params; None:
dpkit.NoParams)."""


@dpkit.hookimpl
def dpkit_register_datasets(register) -> None:
    """Register the built-in datasets."""
    for name, (target, params) in DATASETS.items():
        register(f"{__name__}.{target}", name=name,
                 params=f"{__name__}.params:{params}" if params else dpkit.NoParams,
                 capabilities=("reads_files",) if name == "local_files" else ())
