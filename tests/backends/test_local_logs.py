"""The local backend's logs of a copy another gateway owns (`LocalBackend.logs_elsewhere`, a follower's): the
leader's log file where this host sees it, and only a file that is a copy's log (its path comes from the database);
otherwise a KeyError saying why."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pier.backends.local import LocalBackend


def leaders_log(tmp_path: Path) -> Path:
    log = tmp_path / "leader" / "copies" / "e--v-0" / "copy.log"
    log.parent.mkdir(parents=True)
    log.write_text("one\ntwo\nthree\n")
    return log


def test_the_leaders_log_file_when_this_host_sees_it(tmp_path: Path) -> None:
    follower = LocalBackend(tmp_path / "follower")
    assert asyncio.run(follower.logs_elsewhere("e--v-0", 2, str(leaders_log(tmp_path)))) == "two\nthree\n"


@pytest.mark.parametrize(("copy_id", "path", "said"), [
    ("e--v-0", None, "The leader did not say where copy e--v-0's log is."),
    ("e--v-0", "/etc/passwd", "The leader did not say where copy e--v-0's log is."),
    ("other-0", "LOG", "The leader did not say where copy other-0's log is."),  # another copy's log
    ("e--v-0", "/elsewhere/copies/e--v-0/copy.log", "Copy e--v-0's log is on the leader's host, at "
     "/elsewhere/copies/e--v-0/copy.log, which this gateway's host does not see."),
], ids=["unsaid", "not a copy's log", "another copy's", "not on this host"])
def test_a_log_this_host_cannot_read_is_a_key_error_saying_why(tmp_path: Path, copy_id: str, path: str | None,
                                                               said: str) -> None:
    follower = LocalBackend(tmp_path / "follower")
    given = str(leaders_log(tmp_path)) if path == "LOG" else path
    with pytest.raises(KeyError) as raised:
        asyncio.run(follower.logs_elsewhere(copy_id, 10, given))
    assert raised.value.args[0] == said
