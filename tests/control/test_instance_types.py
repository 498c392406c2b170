from __future__ import annotations

import os
from pathlib import Path

import pytest

from pier.control.api import ControlPlane
from pier.control.errors import ValidationError
from pier.control.instance_types import (
    InstanceType,
    host_cores_for,
    local_instance,
    lookup,
    oversize_warning,
)
from pier.control.resource_store import ResourceStore


@pytest.mark.parametrize(("name", "vcpus", "gib", "accelerators"), [
    ("ml.c7g.large", 2, 4, 0),
    ("ml.c7g.8xlarge", 32, 64, 0),  # the seed's Graviton endpoint: 32 vCPUs, 64 GB
    ("ml.c7i.48xlarge", 192, 384, 0),
    ("ml.m7g.xlarge", 4, 16, 0),
    ("ml.g5.2xlarge", 8, 32, 1),
    ("ml.g5.12xlarge", 48, 192, 4),
    ("ml.g5.48xlarge", 192, 768, 8),
    ("ml.p4d.24xlarge", 96, 1152, 8),  # 8 x A100: the seed's 8 replicas
])
def test_catalogue_has_the_seed_types(name: str, vcpus: int, gib: int, accelerators: int) -> None:
    assert lookup(name) == InstanceType(name, vcpus, gib * 1024, accelerators)


def test_local_is_this_host() -> None:
    local = lookup("local")
    assert local == local_instance()
    assert local.vcpus == len(os.sched_getaffinity(0))
    assert local.memory_mb > 0 and local.accelerators == 0


def test_local_reads_no_setting_per_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    """ml.local's GPUs are discovered once per process (PIER_FAKE_GPUS, the driver), not on every lookup: a
    request naming ml.local reads no environment."""
    first = lookup("local")
    monkeypatch.setenv("PIER_FAKE_GPUS", str(first.accelerators + 3))
    assert lookup("local") == first


def test_unknown_type_says_what_is_known() -> None:
    with pytest.raises(ValidationError, match=r"Unknown InstanceType 'ml.z9.huge'.*'local'.*c7g"):
        lookup("ml.z9.huge")


@pytest.mark.parametrize(("instance", "vcpus", "host", "cores"), [
    (0, (0, 1), (0, 1, 2, 3), (0, 1)),
    (1, (0, 1), (0, 1, 2, 3, 4, 5, 6, 7), (4, 5)),  # instance 1 of a 4-vCPU type starts at vCPU 4
    (0, (2, 3), (0, 1), (0, 1)),  # a 4-vCPU instance on 2 cores wraps around
    (0, (0, 2), (0, 1), (0,)),  # two vCPUs on one core: one core, once
    (0, (0, 1), (4, 6, 9, 11), (4, 6)),  # the cores this process may use, not 0..n
])
def test_vcpus_map_onto_host_cores(instance: int, vcpus: tuple[int, ...], host: tuple[int, ...],
                                   cores: tuple[int, ...]) -> None:
    assert host_cores_for(instance, vcpus, InstanceType("t", 4, 1024), host) == cores


@pytest.mark.parametrize(("itype", "cores", "memory_mb", "said"), [
    ("ml.g5.2xlarge", 2, 24105,  # the host: the line read "... 2 cores and 32768 MiB of memory but ..."
     "ml.g5.2xlarge has 8 vCPUs and 32768 MiB of memory; this host gives pier 2 cores and 24105 MiB: its copies "
     "will share cores and run slower than on a real ml.g5.2xlarge, and may not all fit in memory."),
    ("ml.c7g.8xlarge", 2, 65536,
     "ml.c7g.8xlarge has 32 vCPUs; this host gives pier 2 cores: its copies will share cores and run slower than "
     "on a real ml.c7g.8xlarge."),
    ("ml.c7g.8xlarge", 64, 16384,
     "ml.c7g.8xlarge has 65536 MiB of memory; this host gives pier 16384 MiB: its copies may not all fit in "
     "memory."),
    ("ml.c7g.large", 2, 16384, None),
])
def test_oversize_instance_is_named_with_a_way_out(itype: str, cores: int, memory_mb: int, said: str | None) -> None:
    warning = oversize_warning(lookup(itype), tuple(range(cores)), memory_mb)
    if said is None:
        assert warning is None
    else:
        assert warning == f"{said} Use InstanceType 'local' (this host as one instance) or a smaller type."


@pytest.mark.parametrize(("on_this_host", "warned"), [(True, True), (False, False)])
def test_an_instance_bigger_than_this_host_is_warned_of_only_when_copies_run_here(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, on_this_host: bool, warned: bool) -> None:
    plane = ControlPlane(ResourceStore.open(tmp_path / "state"), copies=lambda workload: [], on_this_host=on_this_host)
    huge = "ml.c7i.48xlarge"  # 192 vCPUs: more than any test machine
    plane.call("CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "v", "InstanceType": huge, "InitialInstanceCount": 1}]}, "us-east-1")
    assert ("this host gives pier" in caplog.text) is warned
