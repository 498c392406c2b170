"""The state folder's stores as one gateway opened them (`state_files.STORES`, in that order): each handed to the
part that uses it, and all of them backed up on the schedule and closed on the way out without being named one by
one, so a new store joins the gateway by its line in `STORES` and its use in `app._assemble`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pier.control.backups import Watched, file_mark
from pier.gateway import state_files
from pier.state_folder.store import Driver, StoreFile

S = TypeVar("S", bound=StoreFile)


class OpenStores:
    def __init__(self, state_dir: Path, declared: tuple[type[StoreFile], ...] = state_files.STORES, *,
                 driver: Driver | None = None) -> None:
        """Opens every declared store, as files of the state folder or through `driver` (a PostgreSQL database:
        `pier up --state-url`); a damaged file of one the gateway needs raises StateDamaged (never replaced), and
        the stores opened before it are closed again."""
        self.state_dir = state_dir
        self.driver = driver
        self._open: dict[type[StoreFile], StoreFile | None] = {}
        try:
            for store in declared:
                self._open[store] = store.for_gateway(state_dir, driver)
        except BaseException:
            self.close()
            raise

    def get(self, store: type[S]) -> S:
        found = self.serving(store)
        if found is None:
            raise LookupError(f"{store.FILE} is not open in this gateway")
        return found

    def serving(self, store: type[S]) -> S | None:
        """The store, or None where the gateway serves without it (its file could not be used; its log says)."""
        if store not in self._open:
            raise LookupError(f"{store.__name__} is not one of the state folder's stores (state_files.STORES)")
        found = self._open[store]
        assert found is None or isinstance(found, store)
        return found

    def watched(self) -> list[Watched]:
        """Every file of the state folder, for the backup schedule: each open store's, and keys.json. A store in a
        database has none: the database's own dumps and recovery keep its copies (docs/state.md)."""
        keys = self.state_dir / state_files.KEYS.name
        return [*(Watched(type(store).state_file(), store.path, _mark(store))
                  for store in self._open.values() if store is not None and store.in_folder),
                Watched(state_files.KEYS, keys, file_mark(keys))]

    def close(self) -> None:
        for store in self._open.values():
            if store is not None:
                store.close()


def _mark(store: StoreFile) -> Callable[[], object]:
    return lambda: store.changes
