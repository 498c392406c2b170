"""Where a `file://` URL, or a name under a folder, lands on this host: the one place pier turns the URLs and names
users give (asynchronous inference's answers, batch transform's records and manifests, data capture's folder,
multi-model targets, model and adapter data) into local paths.

A URL is percent-decoded once, here, and the decoded path is the one checked and the one used: a '.' or '..'
segment, written or encoded (`%2e%2e`, `..%2f`), is refused rather than resolved, so a name never reaches a file
other than the one it reads as, and a name under a folder never leaves it. Imports nothing of pier.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

SCHEME = "file://"


class PathRefused(ValueError):
    """A URL or name that would not name the file it reads as; the message says which and how to fix it."""


def of_url(url: str) -> Path:
    """The path `file:///absolute/path` names, decoded once. Everything after the host is the path: a '?' or '#'
    is part of a file's name (an S3 key may hold them), not a query."""
    if url[:len(SCHEME)].lower() != SCHEME:
        raise PathRefused(f"{url!r} is not a file:///absolute/path URL.")
    host, slash, rest = url[len(SCHEME):].partition("/")
    # file://folder/x names host 'folder', path '/x': refused, or it would write to /x.
    if host not in ("", "localhost") or not slash:
        raise PathRefused(f"{url!r} is not an absolute path: write file:///absolute/path.")
    path = unquote("/" + rest, errors="surrogateescape")
    _check(path.split("/")[1:], url)
    return Path(path)


def under(root: Path, name: str) -> Path:
    """`name`, a path relative to the folder `root` (a key or a model's name: text, never decoded), under it."""
    if name.startswith("/"):
        raise PathRefused(f"{name!r} is an absolute path: name a file under {root} by its path relative to it.")
    _check(name.split("/"), name)
    return root / name


def url_under(folder: str, name: str) -> str:
    """The file:// URL of `name` (URL text, percent-encoded as a URL's path is) under the folder `folder`, its
    decoded form checked: PathRefused when it would name a file outside that folder."""
    of_url(folder)
    joined = folder.rstrip("/") + "/" + name.lstrip("/")
    try:
        of_url(joined)
    except PathRefused:
        decoded = unquote(name, errors="surrogateescape")
        encoded = f" once percent-decoded ({decoded!r})" if decoded != name else ""
        raise PathRefused(f"{name!r} names a file outside {folder}{encoded}") from None
    return joined


def _check(parts: list[str], given: str) -> None:
    if any(part in (".", "..") for part in parts):
        raise PathRefused(f"{given!r} has a '.' or '..' segment once percent-decoded; pier refuses it rather than "
                          "resolve it: name the file by its path without them.")
    if any("\0" in part for part in parts):
        raise PathRefused(f"{given!r} holds a NUL character, which no file name may: name the file without it.")
