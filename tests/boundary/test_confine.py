"""What a confined server may read (code, system folders, public inputs) and write (public caches)
— never the client's places (output folder, artifacts, budget store, the shared temp folder)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from dpkit.boundary.confine import confine_mode, public_paths, readable_roots, writable_roots


def _reaches(roots: list[Path], place: Path) -> bool:
    return any(place.resolve().is_relative_to(root.resolve()) for root in roots)


def test_the_client_places_are_outside_every_readable_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DPKIT_CACHE", str(tmp_path / "cache"))
    for name in ("downloads", "artifacts", "budget"):
        (tmp_path / "cache" / name).mkdir(parents=True)
    out = tmp_path / "runs" / "spec"
    out.mkdir(parents=True)
    writable = writable_roots()
    roots = readable_roots() + writable
    assert _reaches(writable, tmp_path / "cache" / "downloads")
    assert _reaches(roots, Path(__import__("dpkit").__file__))
    assert not _reaches(writable, Path(__import__("dpkit").__file__))
    for private in (tmp_path / "cache" / "artifacts", tmp_path / "cache" / "budget", out,
                    Path("/tmp")):
        assert not _reaches(roots, private), private


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
