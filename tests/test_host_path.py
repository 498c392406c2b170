"""The one place a file:// URL, or a name under a folder, becomes a local path: decoded once, refused when it would
name another file than it reads as."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.host_path import PathRefused, of_url, under, url_under


@pytest.mark.parametrize(("url", "path"), [
    ("file:///srv/out/a.jsonl.out", "/srv/out/a.jsonl.out"),
    ("file://localhost/srv/x", "/srv/x"),
    ("FILE:///srv/x", "/srv/x"),
    ("file:///srv/odd%20name", "/srv/odd name"),
    ("file:///srv/%252e%252e/x", "/srv/%2e%2e/x"),  # decoded once: a folder named '%2e%2e'
    ("file:///srv/a?b#c", "/srv/a?b#c"),  # an S3 key may hold '?' and '#': part of the name, never a query
    ("file:///srv/.hidden/x..y", "/srv/.hidden/x..y"),
])
def test_a_url_is_the_path_it_reads_as(url: str, path: str) -> None:
    assert of_url(url) == Path(path)


@pytest.mark.parametrize(("url", "why"), [
    ("file:///srv/out/job/%2e%2e/%2e%2e/x.jsonl.out", "'.' or '..' segment once percent-decoded"),
    ("file:///srv/in/%2E%2E%2fsecret", "'.' or '..' segment"),
    ("file:///srv/in/..%2f..%2fetc/hostname", "'.' or '..' segment"),
    ("file:///srv/in/../secret/", "'.' or '..' segment"),
    ("file:///srv/./in", "'.' or '..' segment"),
    ("file:///srv/in/%2e", "'.' or '..' segment"),
    ("file:///srv/a%00b", "NUL character"),
    ("file://folder/x", "not an absolute path"),
    ("file://", "not an absolute path"),
    ("s3://b/k", "not a file:///absolute/path URL"),
    ("/srv/x", "not a file:///absolute/path URL"),
])
def test_a_url_that_would_name_another_file_is_refused(url: str, why: str) -> None:
    with pytest.raises(PathRefused, match=why.replace(".", r"\.").replace("(", r"\(")):
        of_url(url)


@pytest.mark.parametrize(("name", "refused"), [
    ("2026/05/01/12/x.jsonl", False), ("%2e%2e/x", False),  # a name is text: '%2e%2e' is a folder of that name
    ("../x", True), ("a/../../x", True), ("./x", True), ("/etc/hostname", True), ("a\0b", True),
])
def test_a_name_under_a_folder_stays_under_it(name: str, refused: bool) -> None:
    root = Path("/srv/capture")
    if refused:
        with pytest.raises(PathRefused):
            under(root, name)
    else:
        assert under(root, name) == root / name


@pytest.mark.parametrize(("folder", "name", "joined"), [
    ("file:///srv/out/job", "a.jsonl.out", "file:///srv/out/job/a.jsonl.out"),
    ("file:///srv/out/job/", "/sub/a.out", "file:///srv/out/job/sub/a.out"),
    ("file:///srv/out/job", "%252e%252e/a.out", "file:///srv/out/job/%252e%252e/a.out"),
])
def test_url_under_joins_a_name_under_its_folder(folder: str, name: str, joined: str) -> None:
    assert url_under(folder, name) == joined


def test_url_under_says_what_the_name_decodes_to() -> None:
    with pytest.raises(PathRefused, match=r"^'%2e%2e/%2e%2e/x.jsonl.out' names a file outside file:///srv/out/job "
                                          r"once percent-decoded \('../../x.jsonl.out'\)$"):
        url_under("file:///srv/out/job", "%2e%2e/%2e%2e/x.jsonl.out")
    with pytest.raises(PathRefused, match=r"^'../x' names a file outside file:///srv/in/$"):
        url_under("file:///srv/in/", "../x")
    with pytest.raises(PathRefused, match=r"'\.' or '\.\.' segment"):
        url_under("file:///srv/in/../", "x")  # the folder itself is checked
