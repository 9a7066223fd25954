"""What a confined server may read (code, system folders, public inputs) and write (public caches)
— never the client's places (output folder, artifacts, budget store, the shared temp folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from dpkit.boundary.confine import (confine_mode, model_and_artifact_caches, public_paths,
                                    readable_roots, writable_roots)


def _reaches(roots: list[Path], place: Path) -> bool:
    return any(place.resolve().is_relative_to(root.resolve()) for root in roots)


def test_the_client_places_are_outside_every_readable_root(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("DPKIT_CACHE", str(cache))
    for name in ("sources/public-corpus", "sources/private-corpus", "downloads/pypi/pkg==1",
                 "converted", "shared/hiddenecho_tokens", "artifacts", "budget", "locks"):
        (cache / name).mkdir(parents=True)
    out = tmp_path / "runs" / "spec"
    out.mkdir(parents=True)
    writable = writable_roots()
    roots = [*readable_roots(), *writable,
             *model_and_artifact_caches([cache / "sources" / "private-corpus"])]
    for public in ("sources/public-corpus", "downloads/pypi/pkg==1", "converted"):
        assert _reaches(roots, cache / public), public
    assert _reaches(roots, Path(__import__("dpkit").__file__))
    assert not _reaches(writable, Path(__import__("dpkit").__file__))
    assert not _reaches(writable, cache / "converted")
    for private in ("sources/private-corpus", "shared/hiddenecho_tokens", "artifacts", "budget",
                    "locks"):
        assert not _reaches(roots, cache / private), private
    assert not _reaches(roots, out) and not _reaches(roots, Path("/tmp"))


def test_public_paths_keep_named_files_but_no_folder_above_the_client_nor_a_secret(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    corpus = tmp_path / "public.csv"
    corpus.write_text("text\nhello\n")
    secret = tmp_path / ".dpkit-noise-secret"
    secret.write_text("x")
    found = public_paths({"path": str(model), "files": [str(corpus), str(secret)]},
                         [{"root": "/"}, {"here": "."}, {"home": str(Path.home())},
                          {"temp": tempfile.gettempdir()}, {"word": "mean"}, None, 3])
    assert found == [str(model.resolve()), str(corpus.resolve())]


def test_an_unknown_confinement_mode_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DPKIT_SERVER_CONFINE", "strict")
    with pytest.raises(ValueError, match="DPKIT_SERVER_CONFINE must be one of auto, off, require"):
        confine_mode()


def test_the_cells_private_corpus_is_named_by_its_artifacts_cache_folders(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from dpkit.boundary.session import private_cache_paths
    from dpkit.contract.plugins import get_registry

    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path))
    registry = get_registry()
    ctx = SimpleNamespace(registry=registry, dataset_ref={"name": "rotten_tomatoes", "params": {}})
    artifact = registry.build("dataset", "rotten_tomatoes", {}).artifact
    assert private_cache_paths(ctx) == [str(tmp_path / "sources" / artifact.key),
                                        str(tmp_path / "downloads" / "pypi" /
                                            f"{artifact.package}=={artifact.version}")]
    assert private_cache_paths(SimpleNamespace(registry=registry, dataset_ref=None)) == []
