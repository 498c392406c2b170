from pathlib import Path

import pytest

from pier.engine.cpus import cgroup_cpu_limit, engine_threads, parse_cfs, parse_cpu_max, usable_cores


@pytest.mark.parametrize(
    ("text", "expected"),
    [("max 100000", None), ("200000 100000", 2), ("150000 100000", 2), ("50000 100000", 1), ("junk", None)],
)
def test_parse_cpu_max(text: str, expected: int | None) -> None:
    assert parse_cpu_max(text) == expected


@pytest.mark.parametrize(("quota", "period", "expected"), [("-1", "100000", None), ("300000", "100000", 3)])
def test_parse_cfs(quota: str, period: str, expected: int | None) -> None:
    assert parse_cfs(quota, period) == expected


def test_cgroup_v2_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert cgroup_cpu_limit(tmp_path) == 1
    assert usable_cores(tmp_path) == 1


def test_no_cgroup_means_affinity(tmp_path: Path) -> None:
    import os

    assert cgroup_cpu_limit(tmp_path) is None
    assert usable_cores(tmp_path) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 2), (4, 4), (7, 7), (8, 7), (16, 15), (64, 63)])
def test_from_8_cores_one_is_left_to_the_event_loop(cores: int, threads: int) -> None:
    assert engine_threads(cores) == threads
