"""Built-in datasets: real corpora and word benchmarks from pinned artifacts, and your own local files.

Registered by reference: building the registry imports the Params of :mod:`dpkit_datasets.catalogue`
and :mod:`dpkit_datasets.local` (neither imports torch); the classes load on first use.
"""

import dpkit

DATASETS = {
    "20newsgroups": ("catalogue:Newsgroups20", "catalogue:CorpusParams"),
    "reuters_r8": ("catalogue:ReutersR8", "catalogue:CorpusParams"),
    "reuters_r52": ("catalogue:ReutersR52", "catalogue:CorpusParams"),
    "rotten_tomatoes": ("catalogue:RottenTomatoes", "catalogue:RottenTomatoesParams"),
    "tweets_sentiment": ("catalogue:TweetsSentiment", "catalogue:SplitParams"),
    "news_articles": ("catalogue:NewsArticles", "catalogue:NewsArticlesParams"),
    "movie_polarity": ("catalogue:MoviePolarity", "catalogue:MoviePolarityParams"),
    "wordsim353": ("catalogue:WordSim353", None),
    "simlex999": ("catalogue:SimLex999", None),
    "analogies": ("catalogue:GoogleAnalogies", None),
    "local_files": ("local:LocalFiles", "local:LocalFileParams"),
}
"""Dataset name -> (module:Class in this package, its Params there; None: dpkit.NoParams)."""


@dpkit.hookimpl
def dpkit_register_datasets(register) -> None:
    """Register the built-in datasets."""
    for name, (target, params) in DATASETS.items():
        register(f"{__name__}.{target}", name=name,
                 params=f"{__name__}.{params}" if params else dpkit.NoParams,
                 capabilities=("reads_files",) if name == "local_files" else ())
