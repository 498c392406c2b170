"""Model files fetched once into a content-addressed cache, so copies start from a local folder.

    <root>/sha256/<digest>/   one model folder, named by what it was made from (the archive's bytes, the
                              S3 ETags, the Hub commit): the same content is never fetched or unpacked twice
    <root>/sources/<hash>     the digest a source identity (URL + ETag or commit) resolved to
    <root>/tmp/               downloads and unpacking in progress; renamed into place when complete

Local folders and GGUF files are served where they are (a GGUF file gets a folder holding a link to it).
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from pier.control.fetch import archives, folders, hf, s3
from pier.control.fetch.source import ModelSource, NoModelData
from pier.errors import PierError
from pier.storage import s3_client

log = logging.getLogger("pier.control")


class ModelDataError(PierError):
    """The model's files could not be fetched; the message names the source and what to check."""

    code = "model_data"


class ModelStore:
    def __init__(self, root: Path, *, s3: Callable[[], Any] = s3_client,
                 hub: Callable[[], hf.Hub] = hf.default_hub, console: Console | None = None) -> None:
        self.root = root
        self._s3 = s3
        self._hub = hub
        self._console = console or Console(stderr=True)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def fetch(self, source: ModelSource) -> Path:
        """The local folder holding the model's files (blocking: run it off the event loop)."""
        with self._lock(source.url):
            try:
                return self._fetch(source)
            except ModelDataError:
                raise
            except archives.UnsafeArchive as error:
                raise ModelDataError(str(error)) from None
            except FileNotFoundError as error:
                raise ModelDataError(f"{source.url}: {error}") from None
            except Exception as error:
                if reason := hf.explain(error, source.url):
                    raise ModelDataError(reason) from None
                raise ModelDataError(
                    f"Could not fetch {source.url}: {type(error).__name__}: {error}. Check the URL and that the "
                    "gateway can reach it (AWS credentials for s3://, HF_TOKEN for gated hf:// repos)."
                ) from None

    def _fetch(self, source: ModelSource) -> Path:
        match source.scheme:
            case "s3":
                return self._fetch_s3(source)
            case "hf":
                return self._fetch_hf(source)
            case _:
                return self._fetch_local(source)

    # ---- local paths and file:// URLs

    def measure(self, folder: Path) -> folders.FolderInfo:
        """What a fetched folder holds, within the walk's bounds (blocking: run it off the event loop)."""
        try:
            return folders.measure(folder)
        except folders.FolderRefused as error:
            raise ModelDataError(str(error)) from None

    def _fetch_local(self, source: ModelSource) -> Path:
        try:
            path = Path(source.local_path)
        except NoModelData as error:
            raise ModelDataError(str(error)) from None
        if not path.exists():
            raise ModelDataError(f"No model at {path}: give an existing folder, .gguf file or model.tar.gz.")
        if path.is_dir():
            try:
                folders.check_folder(path)
            except folders.FolderRefused as error:
                raise ModelDataError(str(error)) from None
            return path.resolve()
        if source.archive:
            digest = _file_sha256(path)
            return self._cached(digest) or self._publish(digest, lambda tmp: archives.extract(path, tmp))
        if path.suffix != ".gguf":
            raise ModelDataError(f"{path} is neither a folder, a .gguf file nor a model.tar.gz.")
        return self._link_folder(path.resolve())

    def _link_folder(self, gguf: Path) -> Path:
        """A folder of its own for one GGUF file, so a file beside other models is served alone."""
        digest = "link-" + hashlib.sha256(str(gguf).encode()).hexdigest()
        return self._cached(digest) or self._publish(digest, lambda tmp: (tmp / gguf.name).symlink_to(gguf))

    # ---- s3://

    def _fetch_s3(self, source: ModelSource) -> Path:
        client = self._s3()
        single = None if source.prefix else s3.head(client, source.url)
        if single is None:
            return self._fetch_s3_prefix(client, source)
        identity = f"s3:{source.url}#{single.etag}"
        known = self._known(identity)
        if known:
            return known
        with self._scratch() as scratch:
            name = single.key.rsplit("/", 1)[-1]
            with self._bar(f"{name}", single.size) as advance:
                s3.download(client, source.url, single.key, scratch / name, advance)
            digest = _file_sha256(scratch / name)
            if source.archive:
                folder = self._cached(digest) or self._publish(
                    digest, lambda tmp: archives.extract(scratch / name, tmp))
            else:
                folder = self._cached(digest) or self._publish(
                    digest, lambda tmp: (scratch / name).rename(tmp / name))
        self._remember(identity, digest)
        return folder

    def _fetch_s3_prefix(self, client: Any, source: ModelSource) -> Path:
        objects = s3.listing(client, source.url)
        if not objects:
            raise ModelDataError(f"Nothing under {source.url}: upload the model files there or fix the S3 URI.")
        digest = hashlib.sha256(s3.prefix_identity(source.url, objects).encode()).hexdigest()
        names = [(o, s3.relative(source.url, o.key)) for o in objects]

        def download(tmp: Path) -> None:
            with self._bar(source.url, sum(o.size for o in objects)) as advance:
                for item, name in names:
                    s3.download(client, source.url, item.key, tmp / name, advance)

        return self._cached(digest) or self._publish(digest, download)

    # ---- hf://

    def _fetch_hf(self, source: ModelSource) -> Path:
        hub = self._hub()
        ref = hf.parse(source.url)
        auth = {"token": source.token} if source.token else {}
        commit, files = hf.choose(ref, hub.model_info(ref.repo, revision=ref.revision, files_metadata=True, **auth))
        identity = f"hf:{ref.repo}@{commit}:" + ",".join(sorted(f for f, _ in files))
        digest = hashlib.sha256(identity.encode()).hexdigest()
        if not self._cached(digest):
            _check_free(self.root, sum(size for _, size in files), source.url)

        def download(tmp: Path) -> None:
            with self._bar(f"{ref.repo}", sum(size for _, size in files)) as advance:
                for name, size in files:
                    hub.hf_hub_download(ref.repo, name, revision=commit, local_dir=tmp, **auth)
                    advance(size)
            shutil.rmtree(tmp / ".cache", ignore_errors=True)  # huggingface_hub's bookkeeping

        return self._cached(digest) or self._publish(digest, download)

    # ---- the cache

    def _cached(self, digest: str) -> Path | None:
        folder = self.root / "sha256" / digest
        return folder if folder.is_dir() else None

    def _publish(self, digest: str, fill: Callable[[Path], object]) -> Path:
        """Fill a scratch folder, then rename it into place: a half-written model is never served."""
        final = self.root / "sha256" / digest
        final.parent.mkdir(parents=True, exist_ok=True)
        with self._scratch() as scratch:
            fill(scratch)
            try:
                scratch.rename(final)
            except OSError:
                if not final.is_dir():  # else another source with the same content got there first
                    raise
        log.info("model files ready in %s", final)
        return final

    @contextmanager
    def _scratch(self) -> Iterator[Path]:
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=self.root / "tmp"))
        try:
            yield scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _known(self, identity: str) -> Path | None:
        index = self._index(identity)
        return self._cached(index.read_text().strip()) if index.is_file() else None

    def _remember(self, identity: str, digest: str) -> None:
        index = self._index(identity)
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(digest)

    def _index(self, identity: str) -> Path:
        return self.root / "sources" / hashlib.sha256(identity.encode()).hexdigest()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    @contextmanager
    def _bar(self, what: str, total: int) -> Iterator[Callable[[int], None]]:
        columns = (TextColumn("[bold]fetching[/] {task.description}"), BarColumn(), DownloadColumn(),
                   TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=self._console, transient=False) as progress:
            task = progress.add_task(what, total=total or None)
            yield lambda n: progress.advance(task, n)


def _check_free(root: Path, needed: int, url: str) -> None:
    """Before a download: room for its files (a conversion checks again for what it writes)."""
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if needed > free:
        raise ModelDataError(f"{url} is {needed / 1e9:.1f} GB, more than the {free / 1e9:.1f} GB free in {root}: free "
                             "some space, or give the gateway a --state-dir on a larger disk.")


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
