"""What a trial deploys for a candidate (pier.tune.trial's Setup)."""

from __future__ import annotations

import pytest

from pier.bench.options import WorkloadKind
from pier.tune.space import Recipe
from pier.tune.trial import Setup, TrialTraffic


def test_a_gpu_candidate_deploys_asking_for_its_gpus() -> None:
    [component] = Setup("m.gguf").deploy_file("tuned", Recipe(4, 12, 8, gpus=1)).components
    assert component.requirements()["NumberOfAcceleratorDevicesRequired"] == 1 and component.copies == 4
    [cpu] = Setup("m.gguf").deploy_file("tuned", Recipe(2, 1, 8)).components
    assert "NumberOfAcceleratorDevicesRequired" not in cpu.requirements()


@pytest.mark.parametrize(("concurrency", "copies", "parallel", "expected"),
                         [(None, 4, 8, 32), (None, 8, 8, 64), (32, 8, 8, 32), (32, 1, 4, 32)])
def test_trials_drive_the_load_given_or_what_the_layout_holds(concurrency: int | None, copies: int, parallel: int,
                                                                 expected: int) -> None:
    workload = TrialTraffic(WorkloadKind.MULTI_TURN, concurrency=concurrency)
    assert workload.clients(Recipe(copies, 16 // copies, parallel, 512, "f16", True, "spin")) == expected
    assert ("32 clients at once" in workload.describe()) is (concurrency == 32)
