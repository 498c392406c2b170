"""The capture writer: records batched into one file per endpoint, variant and hour; a full queue drops (and
counts) instead of waiting; a destination that fails is counted, never raised."""

from __future__ import annotations

import json
import threading
import tracemalloc
from pathlib import Path

from prometheus_client import CollectorRegistry

from pier.capture.capture_writer import MIB, CaptureSettings, CaptureWriter, Job
from pier.capture.captured import Captured, ContentTypes, Side

HOUR = 1_714_568_400.0  # 2024-05-01T13:00:00Z


def job(root: Path, variant: str, when: float, n: int = 0) -> Job:
    captured = Captured("e", variant, f"id-{n}", when, Side(b"{}", "application/json"), None)
    return Job(captured, f"file://{root}", None, ContentTypes.of(json=["application/json"]))


def written(root: Path) -> dict[str, list[str]]:
    return {str(p.relative_to(root).parent): [json.loads(x)["eventMetadata"]["eventId"] for x in p.read_text().split()]
            for p in sorted(root.rglob("*.jsonl"))}


def count(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("pier_data_capture_records_total", {"outcome": outcome}) or 0.0


def test_a_batch_is_one_file_per_variant_and_hour(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    writer = CaptureWriter(lambda: None, CaptureSettings(flush_s=5.0), registry=registry)
    for n, (variant, when) in enumerate([("A", HOUR + 1), ("A", HOUR + 2), ("B", HOUR + 3), ("A", HOUR + 3601)]):
        assert writer.offer(job(tmp_path, variant, when, n))
    writer.close()  # writes what is queued
    assert written(tmp_path) == {"e/A/2024/05/01/13": ["id-0", "id-1"], "e/B/2024/05/01/13": ["id-2"],
                                 "e/A/2024/05/01/14": ["id-3"]}
    assert count(registry, "written") == 4
    assert not list(tmp_path.rglob("*.part"))


class StalledStore:
    """An S3 client whose store stopped answering: every put hangs until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.puts = 0

    def put_object(self, **_: object) -> None:
        self.puts += 1
        self.release.wait()


def test_a_full_queue_drops_and_counts_without_waiting(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    store = StalledStore()
    writer = CaptureWriter(lambda: store, CaptureSettings(queue_size=2, flush_s=0.0, batch=1), registry=registry)
    stalled = Job(job(tmp_path, "A", HOUR).captured, "s3://bucket/prefix", None, ContentTypes())
    results = [writer.offer(stalled) for _ in range(10)]
    assert results.count(False) >= 7 and count(registry, "dropped") == results.count(False)
    store.release.set()
    writer.close()
    assert count(registry, "written") == results.count(True) == store.puts


def test_a_destination_that_fails_is_counted(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    (tmp_path / "file").write_text("")  # a file where the folder should be
    writer = CaptureWriter(lambda: None, CaptureSettings(flush_s=0.01), registry=registry)
    writer.offer(job(tmp_path / "file", "A", HOUR))
    writer.close()
    assert (count(registry, "failed"), count(registry, "written")) == (1, 0)


def test_the_queue_is_bounded_by_bytes_under_5_mib_exchanges() -> None:
    """150 exchanges of 5 MiB each way while the store is slow: capture holds records up to the byte bound, the
    rest are dropped and counted. Encoding the file being written (base64, JSON) adds a few times its records, a
    record here; under a record count alone they took 3.3 GiB."""
    registry = CollectorRegistry()
    store = StalledStore()
    settings = CaptureSettings(queue_bytes=64 * MIB, flush_s=0.2)
    writer = CaptureWriter(lambda: store, settings, registry=registry)
    record = 10 * MIB
    tracemalloc.start()
    try:
        for n in range(150):
            side = bytes([n % 256]) * (5 * MIB)  # a fresh request and answer each time, as the gateway has them
            captured = Captured("e", "A", f"id-{n}", HOUR, Side(side, "application/octet-stream"),
                                Side(side, "application/octet-stream"))
            writer.offer(Job(captured, "s3://bucket/prefix", None, ContentTypes()))
            del side, captured
        held, _ = tracemalloc.get_traced_memory()
        store.release.set()
        writer.close()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < settings.queue_bytes + 1.5 * record  # and the file the store is stuck on: its base64 lines
    assert peak < settings.queue_bytes + 4 * record
    assert count(registry, "dropped") > 0
    assert count(registry, "written") + count(registry, "dropped") == 150


def test_a_record_bigger_than_the_bound_is_dropped(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    writer = CaptureWriter(lambda: None, CaptureSettings(queue_bytes=MIB, flush_s=0.01), registry=registry)
    big = Captured("e", "A", "big", HOUR, Side(bytes(MIB + 1), "application/octet-stream"), None)
    assert not writer.offer(Job(big, f"file://{tmp_path}", None, ContentTypes()))
    assert writer.offer(job(tmp_path, "A", HOUR))
    writer.close()
    assert (count(registry, "dropped"), count(registry, "written")) == (1, 1)


def test_the_byte_bound_is_a_setting() -> None:
    assert CaptureSettings.from_env({"PIER_CAPTURE_QUEUE_MB": "32"}).queue_bytes == 32 * MIB
    assert CaptureSettings.from_env({}).queue_bytes == 128 * MIB
