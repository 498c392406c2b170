"""Endpoints no user made whose copies are wanted too (a running transform job's): their owner puts and drops them,
the reconciler places their copies like any classic variant's, and they are never stored or given a status. Made
before both and handed to each, so neither reaches into the other."""

from __future__ import annotations

import threading

from pier.control.records import EndpointRecord


class ExtraEndpoints:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted: dict[str, EndpointRecord] = {}  # the owner's key (a job's) -> its endpoint

    def want(self, key: str, endpoint: EndpointRecord) -> None:
        with self._lock:
            self._wanted[key] = endpoint

    def drop(self, key: str) -> bool:
        """False when `key` wanted none."""
        with self._lock:
            return self._wanted.pop(key, None) is not None

    def __call__(self) -> list[EndpointRecord]:
        with self._lock:
            return list(self._wanted.values())
