"""llama.cpp's devices as this build sees them, and the hint for a host whose GPUs a CPU build leaves idle."""

from __future__ import annotations

from pathlib import Path

from pier.engine.devices import Device, device_handles, gpu_offload_supported, gpus, host_has_nvidia_gpus


def test_the_cpu_is_always_a_device() -> None:
    devices = [device for _, device in device_handles()]
    assert any(device.kind == "cpu" for device in devices)
    assert all(device.total_bytes >= device.free_bytes >= 0 for device in devices)


def test_a_cpu_build_offers_no_gpu() -> None:
    if not gpu_offload_supported():
        assert gpus() == []


def test_gpus_are_shown_with_their_hardware() -> None:
    h100 = Device("CUDA0", "NVIDIA H100 80GB HBM3", "gpu", 70 * 2**30, 80 * 2**30)
    assert h100.is_gpu and h100.shown() == "CUDA0 (NVIDIA H100 80GB HBM3, 80.0 GiB)"
    assert Device("CPU", "AMD EPYC", "cpu", 1, 1).shown() == "CPU"


def test_nvidia_gpus_are_seen_through_the_driver(tmp_path: Path) -> None:
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    dev.mkdir()
    assert not host_has_nvidia_gpus(proc, dev)
    (dev / "nvidiactl").touch()  # the driver's control node alone is no GPU
    assert not host_has_nvidia_gpus(proc, dev)
    (dev / "nvidia0").touch()
    assert host_has_nvidia_gpus(proc, dev)
    (proc / "0000:00:1e.0").mkdir(parents=True)
    assert host_has_nvidia_gpus(proc, tmp_path / "none")
