"""What a trial deploys for a candidate (pier.tune.runner's Setup)."""

from __future__ import annotations

from pier.tune.runner import Setup
from pier.tune.space import Candidate


def test_a_gpu_candidate_deploys_asking_for_its_gpus() -> None:
    [component] = Setup("m.gguf").deploy_file("tuned", Candidate(4, 12, 8, gpus=1)).components
    assert component.requirements()["NumberOfAcceleratorDevicesRequired"] == 1 and component.copies == 4
    [cpu] = Setup("m.gguf").deploy_file("tuned", Candidate(2, 1, 8)).components
    assert "NumberOfAcceleratorDevicesRequired" not in cpu.requirements()
