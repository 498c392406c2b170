"""This host's GPUs: nvidia-smi's rows, the fake inventory, the gateway's own CUDA_VISIBLE_DEVICES; and, on a host
with a driver, what discovery finds against nvidia-smi's own count."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pier.errors import PierError
from pier.gpus import FAKE_NAME, Gpu, GpuInventory, discover, fake, parse_smi, visible

H100 = "0, NVIDIA H100 80GB HBM3, 81559, GPU-7d1c5f7e-aaaa-bbbb-cccc-000000000000"


@pytest.mark.parametrize(("text", "expected"), [
    ("", ()),
    (H100 + "\n", (Gpu(0, "NVIDIA H100 80GB HBM3", 81559, "GPU-7d1c5f7e-aaaa-bbbb-cccc-000000000000"),)),
    ("0, NVIDIA A10G, 23028 MiB, GPU-a\n1, NVIDIA A10G, 23028 MiB, GPU-b\n",  # with units, as csv,noheader
     (Gpu(0, "NVIDIA A10G", 23028, "GPU-a"), Gpu(1, "NVIDIA A10G", 23028, "GPU-b"))),
    ("3, Odd, Name, 1024, GPU-c", (Gpu(3, "Odd, Name", 1024, "GPU-c"),)),  # a comma in the name
])
def test_nvidia_smi_rows(text: str, expected: tuple[Gpu, ...]) -> None:
    assert parse_smi(text) == expected


@pytest.mark.parametrize(("value", "count"), [("4", 4), (" 2 ", 2), ("0", 0)])
def test_the_fake_inventory_stands_in_for_the_host(value: str, count: int) -> None:
    found = discover({"PIER_FAKE_GPUS": value})
    assert found.ids == tuple(range(count)) and found.source == "PIER_FAKE_GPUS"
    assert all(g.name == FAKE_NAME and g.memory_mb > 0 for g in found.gpus)
    assert found.describe() == (f"{count} x {FAKE_NAME} (24576 MiB)" if count else "no GPUs")


@pytest.mark.parametrize("value", ["four", "-1", "2.5"])
def test_a_fake_count_that_is_no_number_says_how_to_fix_it(value: str) -> None:
    with pytest.raises(PierError, match=r"PIER_FAKE_GPUS=.* is not a whole number of GPUs; set it to e\.g\. 4"):
        discover({"PIER_FAKE_GPUS": value})


@pytest.mark.parametrize(("setting", "ids"), [
    (None, (0, 1, 2, 3)),  # unset: every GPU
    ("", ()),  # set empty: none, as CUDA reads it
    ("2,0", (2, 0)),
    ("1,7,2", (1,)),  # CUDA stops at the first name that matches no GPU
    ("GPU-fake-3", (3,)),  # by UUID (or a prefix of one)
    ("1,1", (1,)),
])
def test_the_gateways_own_cuda_visible_devices_limits_its_gpus(setting: str | None, ids: tuple[int, ...]) -> None:
    assert visible(fake(4), setting).ids == ids


def test_mixed_gpus_are_described_one_by_one() -> None:
    mixed = GpuInventory((Gpu(0, "A", 1), Gpu(1, "B", 2)), "nvml")
    assert mixed.describe() == "0: A (1 MiB), 1: B (2 MiB)"
    assert mixed.to_json()["gpus"][1] == {"id": 1, "name": "B", "memory_mb": 2, "uuid": ""}


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no NVIDIA driver on this host")
def test_discovery_finds_what_nvidia_smi_lists() -> None:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    found = discover({})
    assert len(found) == len([line for line in listed.splitlines() if line.startswith("GPU ")])
    assert found.source in ("nvml", "nvidia-smi") and all(g.memory_mb > 1000 for g in found.gpus)


def test_build_advice_only_for_real_gpus_a_cpu_build_cannot_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from pier.engine import devices
    from pier.gpus import Gpu, GpuInventory, fake, gpu_build_advice

    real = GpuInventory((Gpu(0, "NVIDIA H100 80GB HBM3", 81559, "GPU-1"),), "nvidia-smi")
    assert gpu_build_advice(GpuInventory()) is None
    assert gpu_build_advice(fake(4)) is None  # fake GPUs are for placement tests: nothing to build for
    monkeypatch.setattr(devices, "gpu_offload_supported", lambda: False)
    advice = gpu_build_advice(real)
    assert advice is not None and "-DGGML_CUDA=on" in advice
    monkeypatch.setattr(devices, "gpu_offload_supported", lambda: True)
    assert gpu_build_advice(real) is None
