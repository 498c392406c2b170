"""The capture writer: a bounded queue and one thread that writes what it holds as files, so capturing never
slows or fails a request. The queue is bounded by records and by bytes (a record's request and answer, held until
written): whoever may invoke an endpoint chooses how big its exchanges are, and a record count alone let 150
exchanges of 5 MiB each way take gigabytes. A full queue drops the record (counted); a destination that fails is
logged and its records counted as failed; neither reaches the client.

Records are batched for `flush_s` (or up to `batch` records, or `batch_bytes`), then written one file per
destination, endpoint, variant and hour: SageMaker's layout, so its readers list them as they list its own.
"""

from __future__ import annotations

import io
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

from pier.capture.captured import Captured, ContentTypes, file_name, folder, line
from pier.capture.destination import Destination, destination_of
from pier.env import GATEWAY, Env, integer, number

log = logging.getLogger(__name__)

QUEUE_SETTING = "PIER_CAPTURE_QUEUE_SIZE"
QUEUE_MB_SETTING = "PIER_CAPTURE_QUEUE_MB"
FLUSH_SETTING = "PIER_CAPTURE_FLUSH_SECONDS"
MIB = 1024 * 1024


@dataclass(frozen=True)
class CaptureSettings:
    queue_size: int = 10_000  # records waiting to be written; more are dropped
    queue_bytes: int = 128 * MIB  # request and answer bytes of the records not written yet; more are dropped
    flush_s: float = 5.0  # how long records gather before they are written
    batch: int = 1_000  # records that are written at once, however soon
    batch_bytes: int = 8 * MIB  # a file's records' bytes (more go in the next file)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CaptureSettings:
        read = Env(env, GATEWAY)
        megabytes = read.get(QUEUE_MB_SETTING, cast=integer("a number of MiB"), default=cls.queue_bytes // MIB)
        return cls(queue_size=read.get(QUEUE_SETTING, cast=integer("a number of records"), default=cls.queue_size),
                   queue_bytes=megabytes * MIB,
                   flush_s=read.get(FLUSH_SETTING, cast=number(above=0), default=cls.flush_s))


@dataclass(frozen=True)
class Job:
    """One captured exchange and where it goes."""

    captured: Captured
    destination: str  # DestinationS3Uri
    kms_key: str | None
    types: ContentTypes

    @property
    def size(self) -> int:
        """The bytes it holds until written: its request and answer."""
        sides = (self.captured.input, self.captured.output)
        return sum(len(side.data) for side in sides if side is not None)


class CaptureWriter:
    def __init__(self, s3_client: Callable[[], Any], settings: CaptureSettings | None = None, *,
                 registry: CollectorRegistry | None = None) -> None:
        self.settings = settings or CaptureSettings()
        self.s3_client = s3_client
        self.records = Counter("pier_data_capture_records", "Captured records by outcome: written, dropped (the "
                               "queue was full, by records or by bytes), failed (the destination refused them).",
                               ("outcome",), registry=registry)
        self._queue: queue.Queue[Job | None] = queue.Queue(self.settings.queue_size)
        self._destinations: dict[tuple[str, str | None], Destination] = {}
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._held = 0  # bytes of the records queued or being written
        self._pending: Job | None = None  # taken from the queue, too big for the file being gathered
        self._held_lock = threading.Lock()

    def offer(self, job: Job) -> bool:
        """Queue a record without waiting; False (and counted as dropped) when the queue is full, by records or by
        bytes (a record bigger than the whole bound is never queued)."""
        self._start()
        size = job.size
        with self._held_lock:
            if self._held + size > self.settings.queue_bytes:
                self.records.labels("dropped").inc()
                return False
            self._held += size
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self._release(size)
            self.records.labels("dropped").inc()
            return False
        return True

    def _release(self, size: int) -> None:
        with self._held_lock:
            self._held -= size

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
            first, self._pending = self._pending or self._queue.get(), None
            if first is None:
                break
            jobs, closing = self._gather(first)
            del first
            size = sum(job.size for job in jobs)
            self._write(jobs)
            del jobs  # the records' bytes are gone before the bound lets more in
            self._release(size)

    def _gather(self, first: Job) -> tuple[list[Job], bool]:
        """The batch `first` begins, and whether the writer was closed meanwhile. A file holds records up to
        `batch_bytes` together (a bigger record alone): what encoding it takes stays in proportion."""
        jobs, size = [first], first.size
        due = time.monotonic() + self.settings.flush_s
        while len(jobs) < self.settings.batch and (left := due - time.monotonic()) > 0:
            try:
                job = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            if size + job.size > self.settings.batch_bytes:
                self._pending = job  # the next file's first
                break
            jobs.append(job)
            size += job.size
        return jobs, False

    def _write(self, jobs: list[Job]) -> None:
        for (destination, kms_key, hour), group in _files(jobs).items():
            body = _body(group)
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


def _body(group: list[Job]) -> bytes:
    """The file's JSON lines, encoded one by one: a record's encoded copies go before the next is encoded."""
    out = io.BytesIO()
    for job in group:
        out.write(json.dumps(line(job.captured, job.types), separators=(",", ":")).encode())
        out.write(b"\n")
    return out.getvalue()


def _files(jobs: list[Job]) -> dict[tuple[str, str | None, str], list[Job]]:
    """The records of a batch by the file they go in: destination, key, and the hour's folder."""
    files: dict[tuple[str, str | None, str], list[Job]] = {}
    for job in jobs:
        hour = folder(job.captured.endpoint, job.captured.variant, job.captured.inference_time)
        files.setdefault((job.destination, job.kms_key, hour), []).append(job)
    return files
