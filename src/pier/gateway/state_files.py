"""The files of pier's state folder, each owned by the store that writes it; the gateway, which joins those stores,
is where they are listed (`STORES`: a new store joins by its line there), so the gateway opens, backs up and closes
them all (`gateway/stores.py`), and restore and `pier state check` go over all of them, while no store knows the
others (each store a pier.state_folder `StoreFile`; each file behind its `StateFile`: checked, copied whole).

    state.sqlite3        the control plane's resources (pier.control.resource_store)
    autoscaling.sqlite3  scalable targets, policies, alarms, activities, metric history
                         (pier.autoscaling.autoscaling_store)
    keys.json            the gateway's keys (pier.security.keystore)
    sessions.sqlite3     the open stateful sessions, each with its copy (pier.runtime.session_store)
    async.sqlite3        asynchronous inference requests accepted and not yet answered (pier.async_inference.queue)
    transforms.sqlite3   transform jobs and the progress of running ones (pier.transform.transform_store)
"""

from __future__ import annotations

import os
from pathlib import Path

from pier.async_inference.queue import AsyncQueue
from pier.autoscaling.autoscaling_store import Store as AutoscalingStore
from pier.control.resource_store import ResourceStore
from pier.runtime.session_store import SessionStore
from pier.security import keystore
from pier.state_folder.errors import StateDamaged, StateError
from pier.state_folder.files import Report, StateFile
from pier.state_folder.layout import FILE_MODE
from pier.state_folder.rows import BadRow
from pier.state_folder.store import StoreFile
from pier.transform.transform_store import TransformStore


class KeyFile(StateFile):
    """keys.json: a JSON document, copied byte for byte once it reads whole (a damaged key file is never backed
    up, so it never pushes a good backup out)."""

    def _read(self, path: Path, report: Report) -> None:
        try:
            keys, bad = keystore.read_document(path.read_bytes())
        except ValueError as error:
            report.problems.append(str(error))
            return
        report.records = {"keys": len(keys)}
        report.unreadable = [BadRow("key", name, 0.0, why) for name, why in bad]
        report.names = {f"key {k.principal.name}" for k in keys} | {f"key {name}" for name, _ in bad}

    def copy(self, source: Path, dest: Path) -> None:
        if not source.is_file():
            raise StateError(f"There is no file at {source}.")
        data = source.read_bytes()
        try:
            _, bad = keystore.read_document(data)
        except ValueError as error:
            raise StateError(keystore.damaged(source, str(error))) from None
        if bad:
            raise StateError(keystore.damaged(source, "; ".join(f"key {name}: {why}" for name, why in bad)))
        dest.unlink(missing_ok=True)
        descriptor = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            dest.unlink(missing_ok=True)
            raise


# Every store of the state folder, in the order the gateway opens them: a new store joins here.
STORES: tuple[type[StoreFile], ...] = (ResourceStore, AutoscalingStore, SessionStore, AsyncQueue, TransformStore)
KEYS = KeyFile(keystore.FILE_NAME, required=False,
               without="no keys (create them again: pier keys create)",
               mend="Mend or remove each entry")
_DECLARED = tuple(store.state_file() for store in STORES)
STATE, AUTOSCALING, SESSIONS, ASYNC, TRANSFORMS = _DECLARED[:5]
FILES: tuple[StateFile, ...] = (*_DECLARED[:2], KEYS, *_DECLARED[2:])  # keys.json third, as pier state check lists it


def refuse_damaged(state_dir: Path) -> None:
    """At start, for the files the gateway does not open as databases itself (keys.json): StateDamaged with the
    file's name and the fix when one cannot be read whole."""
    report = KEYS.check(state_dir / KEYS.name)
    if not report.ok:
        problems = report.problems + [f"key {row.name}: {row.reason}" for row in report.unreadable]
        raise StateDamaged(report.path, "; ".join(problems), KEYS.without)
