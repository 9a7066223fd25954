"""The fingerprint that keys a budget, one function at a time: the digest a store keeps (so a
budget written by an earlier dpkit is found again), the name-keyed fallback, and the once-per-
process load that identifies a cell's data."""

import hashlib
from pathlib import Path

import pytest

import dpkit.contract.context
from dpkit.budget.fingerprint import DatasetIds, dataset_id, identify, records_digest
from dpkit.data.records import RECORD_HASH, record_hashes
from dpkit.data.types import WordPairs


def test_the_digest_is_sha256_of_the_sorted_hashes_one_a_line_whatever_the_sets_order():
    hashes = ["c" * 32, "a" * 32, "b" * 32]
    expected = hashlib.sha256("".join(h + "\n" for h in sorted(hashes)).encode()).hexdigest()
    assert records_digest(frozenset(hashes)) == "records:" + expected  # the stored key's format
    assert records_digest(frozenset(reversed(hashes))) == records_digest(frozenset(hashes))


def test_the_digest_keeps_records_apart():
    assert records_digest(frozenset({"ab", "c"})) != records_digest(frozenset({"a", "bc"}))
    assert records_digest(frozenset({"a"})) != records_digest(frozenset({"a", "b"}))


def test_a_dataset_is_keyed_by_its_records_and_says_how_it_was_identified():
    records = record_hashes(f"row {i}" for i in range(1200))
    found = dataset_id("corpus", records, "first read as corpus")
    assert found.fingerprint == records_digest(records) and found.records == records
    assert found.name == "corpus"
    assert found.basis == f"1,200 records ({RECORD_HASH}), first read as corpus"
    assert dataset_id("corpus", records).basis == f"1,200 records ({RECORD_HASH})"
    assert dataset_id("renamed", records).fingerprint == found.fingerprint


def test_a_dataset_without_known_records_is_keyed_by_its_name():
    found = dataset_id("corpus", None, "first read as corpus")
    assert (found.name, found.fingerprint, found.records) == ("corpus", "name:corpus", None)
    assert found.basis == ("no record hashes known: every run of this dataset name shares one "
                           "budget")


def test_an_empty_dataset_has_nothing_to_be_keyed_by():
    with pytest.raises(ValueError, match="dataset 'empty' has no records to identify it by"):
        dataset_id("empty", frozenset())


def test_a_loaded_dataset_is_identified_by_its_records():
    pairs = WordPairs("sim", [("cat", "dog", 0.5), ("sun", "moon", 0.25)])
    found = identify(pairs, "sim", "first read as sim")
    assert found.records == record_hashes(["cat\tdog\t0.5", "sun\tmoon\t0.25"])
    assert found.basis.endswith(", first read as sim")
    assert identify(pairs, "sim").basis == f"2 records ({RECORD_HASH})"
    assert identify(object(), "opaque").fingerprint == "name:opaque"


@pytest.fixture
def loads(monkeypatch):
    """Every (name, params, device) the identifier loads; each load is a word-pair benchmark."""
    seen = []

    def load(registry, kind, name, params, device):
        assert kind == "dataset"
        seen.append((name, params, str(device)))
        return WordPairs(name, [(name, str(p), 1.0) for p in sorted(params.items())] or
                         [(name, "-", 1.0)])

    monkeypatch.setattr(dpkit.contract.context, "load_component", load)
    return seen


def test_each_data_ref_is_loaded_once_on_the_cpu_whatever_its_params_order(loads):
    ids = DatasetIds(registry=None)
    first = ids({"name": "bench", "params": {"a": 1, "b": 2}})
    again = ids({"name": "bench", "params": {"b": 2, "a": 1}})
    assert again is first and loads == [("bench", {"a": 1, "b": 2}, "cpu")]
    assert ids({"name": "bench", "params": {"a": 1, "b": 3}}) != first
    assert ids({"name": "other", "params": {"a": 1, "b": 2}}) != first
    assert len(loads) == 3


def test_a_ref_without_params_loads_with_none(loads):
    ids = DatasetIds(registry=None)
    bare = ids({"name": "bench"})
    assert ids({"name": "bench", "params": None}) is bare
    assert loads == [("bench", {}, "cpu")]
    assert (bare.name, bare.basis.endswith(", first read as bench")) == ("bench", True)


def test_a_file_ref_is_named_after_its_file_and_where_it_was_first_read(loads, tmp_path):
    path = tmp_path / "folder" / "corpus.csv"
    found = DatasetIds(registry=None)({"name": "local_files", "params": {"path": path}})
    assert found.name == "local_files:corpus.csv"
    assert found.basis.endswith(f", first read as local_files from {path}")
    assert loads[0][1] == {"path": path} and isinstance(loads[0][1]["path"], Path)
