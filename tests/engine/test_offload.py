"""Where a copy's model goes: the offload plan (pure) and the GPU memory check, table-driven."""

from __future__ import annotations

import pytest

from pier.engine.devices import Device
from pier.engine.offload import ALL_LAYERS, ON_CPU, GpuSettings, Offload, OffloadError, fit_problem, plan_offload

GIB = 2**30


def gpu(index: int, free_gib: float = 79.0) -> Device:
    return Device(f"CUDA{index}", "NVIDIA H100 80GB HBM3", "gpu", int(free_gib * GIB), 80 * GIB)


FOUR = [gpu(i) for i in range(4)]


@pytest.mark.parametrize(("wanted", "visible", "supported", "expected"), [
    (GpuSettings(), [], False, ON_CPU),  # a CPU build on a CPU host: as before
    (GpuSettings(), [], True, ON_CPU),  # a GPU build that sees no GPU (CUDA_VISIBLE_DEVICES="")
    (GpuSettings(), FOUR[:1], True, Offload((0,), ALL_LAYERS, "none")),  # standalone: every GPU it sees
    (GpuSettings(), FOUR, True, Offload((0, 1, 2, 3), ALL_LAYERS, "layer")),
    (GpuSettings(gpus=2), FOUR, True, Offload((0, 1), ALL_LAYERS, "layer")),  # SM_NUM_GPUS=2
    (GpuSettings(gpus=0), FOUR, True, ON_CPU),  # the gateway gave it none
    (GpuSettings(gpu_layers=0), FOUR, True, ON_CPU),  # PIER_GPU_LAYERS=0: the operator's CPU copy
    (GpuSettings(gpus=1, gpu_layers=10), FOUR, True, Offload((0,), 10, "none")),  # partial, when asked
    (GpuSettings(gpus=2, split_mode="row", main_gpu=1, tensor_split=(3.0, 1.0)), FOUR, True,
     Offload((0, 1), ALL_LAYERS, "row", 1, (3.0, 1.0))),
])
def test_plan(wanted: GpuSettings, visible: list[Device], supported: bool, expected: Offload) -> None:
    assert plan_offload(wanted, visible, supported) == expected


@pytest.mark.parametrize(("wanted", "visible", "supported", "says"), [
    (GpuSettings(gpus=1), [], False, "built without a GPU backend"),
    (GpuSettings(gpus=1), [], False, "DGGML_CUDA=on"),
    (GpuSettings(gpus=2), FOUR[:1], True, "holds 2 GPUs but llama.cpp sees 1"),
    (GpuSettings(gpus=1), [], True, "CUDA_VISIBLE_DEVICES"),
    (GpuSettings(gpus=2, main_gpu=2), FOUR, True, "PIER_MAIN_GPU=2"),
    (GpuSettings(gpus=1, tensor_split=(1.0, 1.0)), FOUR, True, "one share per GPU"),
])
def test_a_copy_never_drops_to_the_cpu_by_itself(
    wanted: GpuSettings, visible: list[Device], supported: bool, says: str
) -> None:
    with pytest.raises(OffloadError, match=says):
        plan_offload(wanted, visible, supported)


@pytest.mark.parametrize(("offload", "visible", "weights_gib", "kv_gib", "fits"), [
    (Offload((0,), ALL_LAYERS), [gpu(0, 79)], 16, 8, True),
    (Offload((0,), ALL_LAYERS), [gpu(0, 20)], 16, 8, False),
    (Offload((0, 1), ALL_LAYERS, "layer"), [gpu(0, 20), gpu(1, 20)], 16, 8, True),  # two GPUs' memory together
    (Offload((0,), 10), [gpu(0, 1)], 16, 8, True),  # a partial offload is the operator's sizing
    (ON_CPU, [], 16, 8, True),
])
def test_fit(offload: Offload, visible: list[Device], weights_gib: int, kv_gib: int, fits: bool) -> None:
    problem = fit_problem(offload, visible, weights_gib * GIB, kv_gib * GIB)
    assert (problem is None) is fits


def test_a_model_too_big_says_what_it_needs_and_how_to_fix_it() -> None:
    problem = fit_problem(Offload((0,), ALL_LAYERS), [gpu(0, 20)], 16 * GIB, 8 * GIB)
    assert problem is not None
    assert "needs about 25.3 GiB" in problem and "has 20.0 GiB free" in problem
    assert "PIER_GPU_LAYERS" in problem and "SM_NUM_GPUS" in problem


@pytest.mark.parametrize(("offload", "visible", "shares"), [
    (ON_CPU, 0, None),
    (Offload((0,), ALL_LAYERS), 1, None),  # every GPU it sees: llama.cpp's own split
    (Offload((0, 1), ALL_LAYERS, "layer"), 4, (1.0, 1.0, 0.0, 0.0)),  # SM_NUM_GPUS=2 on a host of 4, standalone
    (Offload((0, 1), ALL_LAYERS, "layer", 0, (3.0, 1.0)), 4, (3.0, 1.0)),  # the operator's shares win
])
def test_layers_go_only_to_the_gpus_a_copy_holds(
    offload: Offload, visible: int, shares: tuple[float, ...] | None
) -> None:
    from pier.engine.llama import _layer_shares

    assert _layer_shares(offload, visible) == shares
