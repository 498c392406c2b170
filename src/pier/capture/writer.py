"""The capture writer: a bounded queue and one thread that writes what it holds as files, so capturing never
slows or fails a request. A full queue drops the record (counted); a destination that fails is logged and its
records counted as failed; neither reaches the client.

Records are batched for `flush_s` (or up to `batch` records), then written one file per destination, endpoint,
variant and hour: SageMaker's layout, so its readers list them as they list its own.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from pier.capture.destination import Destination, destination_of
from pier.capture.record import Captured, ContentTypes, file_name, folder, line
from pier.env import GATEWAY, Env, integer, number

log = logging.getLogger(__name__)

QUEUE_SETTING = "PIER_CAPTURE_QUEUE_SIZE"
FLUSH_SETTING = "PIER_CAPTURE_FLUSH_SECONDS"


@dataclass(frozen=True)
class CaptureSettings:
    queue_size: int = 10_000  # records waiting to be written; more are dropped
    flush_s: float = 5.0  # how long records gather before they are written
    batch: int = 1_000  # records that are written at once, however soon

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CaptureSettings:
        read = Env(env, GATEWAY)
        return cls(queue_size=read.get(QUEUE_SETTING, cast=integer("a number of records"), default=cls.queue_size),
                   flush_s=read.get(FLUSH_SETTING, cast=number(above=0), default=cls.flush_s))


@dataclass(frozen=True)
class Job:
    """One captured exchange and where it goes."""

    captured: Captured
    destination: str  # DestinationS3Uri
    kms_key: str | None
    types: ContentTypes


class CaptureWriter:
    def __init__(self, s3_client: Callable[[], Any], settings: CaptureSettings | None = None, *,
                 registry: CollectorRegistry | None = None) -> None:
        self.settings = settings or CaptureSettings()
        self.s3_client = s3_client
        self.records = Counter("pier_data_capture_records", "Captured records by outcome: written, dropped (the "
                               "queue was full), failed (the destination refused them).", ("outcome",),
                               registry=registry)
        self._queue: queue.Queue[Job | None] = queue.Queue(self.settings.queue_size)
        self._destinations: dict[tuple[str, str | None], Destination] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def offer(self, job: Job) -> bool:
        """Queue a record without waiting; False (and counted as dropped) when the queue is full."""
        self._start()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.records.labels("dropped").inc()
            return False
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, then stop."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._queue.put(None)
        thread.join(timeout_s)

    def _start(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="data capture", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        closing = False
        while not closing:
            first = self._queue.get()
            if first is None:
                break
            jobs = [first]
            due = time.monotonic() + self.settings.flush_s
            while len(jobs) < self.settings.batch and (left := due - time.monotonic()) > 0:
                try:
                    job = self._queue.get(timeout=left)
                except queue.Empty:
                    break
                if job is None:
                    closing = True
                    break
                jobs.append(job)
            self._write(jobs)

    def _write(self, jobs: list[Job]) -> None:
        for (destination, kms_key, hour), group in _files(jobs).items():
            body = b"".join(json.dumps(line(j.captured, j.types), separators=(",", ":")).encode() + b"\n"
                            for j in group)
            key = f"{hour}/{file_name(group[0].captured.inference_time, uuid.uuid4().hex)}"
            try:
                self._destination(destination, kms_key).write(key, body)
            except Exception as error:
                log.warning("data capture: %d records not written to %s/%s: %s", len(group), destination, key, error)
                self.records.labels("failed").inc(len(group))
            else:
                self.records.labels("written").inc(len(group))

    def _destination(self, uri: str, kms_key: str | None) -> Destination:
        found = self._destinations.get((uri, kms_key))
        if found is None:
            found = self._destinations[(uri, kms_key)] = destination_of(uri, kms_key, self.s3_client)
        return found


def _files(jobs: list[Job]) -> dict[tuple[str, str | None, str], list[Job]]:
    """The records of a batch by the file they go in: destination, key, and the hour's folder."""
    files: dict[tuple[str, str | None, str], list[Job]] = {}
    for job in jobs:
        hour = folder(job.captured.endpoint, job.captured.variant, job.captured.inference_time)
        files.setdefault((job.destination, job.kms_key, hour), []).append(job)
    return files
