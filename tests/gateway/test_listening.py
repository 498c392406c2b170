"""What `pier keys revoke` says the last revoke does, from where the running gateway listens."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pier.control.backups import GatewayLock
from pier.gateway import listening
from pier.gateway.listening import Listening, Running, revoke_warning

PID = str(os.getpid())
WIDE = Running(PID, Listening("0.0.0.0", 8080, False, os.getpid()))
WIDE_INSECURE = Running(PID, Listening("0.0.0.0", 8080, True, os.getpid()))
LOCAL = Running(PID, Listening("127.0.0.1", 8080, False, os.getpid()))
UNKNOWN = Running(PID, None)
STOPPED = Running(None, None)


@pytest.mark.parametrize(
    ("valid", "expired", "gateway", "words"),
    [
        (1, 0, WIDE, None),  # a valid key is left: nothing changes
        (2, 3, UNKNOWN, None),
        (0, 0, WIDE, "on 0.0.0.0:8080 now REFUSES EVERY CALL (it listens beyond loopback)"),
        (0, 1, LOCAL, "REFUSES EVERY CALL (its other keys have expired)"),
        (0, 1, WIDE_INSECURE, "REFUSES EVERY CALL (its other keys have expired)"),
        (0, 0, WIDE_INSECURE, "--insecure, so it now serves ANYONE who reaches 0.0.0.0:8080 WITHOUT AUTHENTICATION"),
        (0, 0, LOCAL, "serves every local user without authentication"),
        (0, 0, UNKNOWN, "if it listens beyond loopback (--host 0.0.0.0 or a network address), it now REFUSES EVERY"),
        (0, 0, STOPPED, "No gateway runs on this state folder now"),
    ],
)
def test_revoke_warning(valid: int, expired: int, gateway: Running, words: str | None) -> None:
    warning = revoke_warning(valid, expired, gateway)
    if words is None:
        assert warning is None
        return
    assert warning is not None and words in warning
    assert "pier keys create NAME --role admin" in warning


def test_the_record_counts_only_while_its_gateway_holds_the_folder(tmp_path: Path) -> None:
    assert listening.running(tmp_path) == STOPPED
    lock = GatewayLock.take(tmp_path)
    try:
        assert listening.running(tmp_path) == UNKNOWN  # running, but it wrote no record
        listening.record(tmp_path, "0.0.0.0", 8080, False)
        assert listening.running(tmp_path) == WIDE
        (tmp_path / listening.FILE_NAME).write_text('{"host": "0.0.0.0", "port": 1, "insecure": false, "pid": 1}')
        assert listening.running(tmp_path) == UNKNOWN  # another process's record: stale
        (tmp_path / listening.FILE_NAME).write_text("garbage")
        assert listening.running(tmp_path) == UNKNOWN
    finally:
        lock.release()
    assert listening.running(tmp_path) == STOPPED
