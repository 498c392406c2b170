"""The backends `pier up` knows: each declared once, with its capabilities, flags and options."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends.local import LocalBackend
from pier.backends.ray import RayBackend, RayConfig
from pier.backends.registry import FLAGS, LOCAL, RAY, choose


def test_each_backend_declares_its_name_and_capabilities_once() -> None:
    assert (LocalBackend.name, LocalBackend.capabilities) == (LOCAL.name, LOCAL.capabilities)
    assert (RayBackend.name, RayBackend.capabilities) == (RAY.name, RAY.capabilities)
    assert LOCAL.capabilities.local_processes and LOCAL.capabilities.host_cores is None
    assert not RAY.capabilities.local_processes and RAY.capabilities.host_cores == tuple(range(256))


def test_the_flags_are_the_command_lines() -> None:
    assert [f.option for f in FLAGS] == ["--ray-address", "--ray-config", "--ray-namespace", "--ray-cpus-per-vcpu"]
    assert [f.option for f in FLAGS if not f.in_pier_up] == ["--ray-namespace"]


def test_options_are_validated_into_the_backends_model(tmp_path: Path) -> None:
    assert choose("local", {"address": "auto"}).options is None  # another backend's flags are not its own
    assert choose("ray").options == RayConfig()
    file = tmp_path / "ray.yaml"
    file.write_text("namespace: team\ncpus_per_vcpu: 2\n")
    chosen = choose("ray", {"config": file, "address": "auto", "cpus_per_vcpu": None, "namespace": None})
    assert chosen.options == RayConfig(address="auto", namespace="team", cpus_per_vcpu=2.0)
    assert choose("ray", {"config": file, "cpus_per_vcpu": 0.5}).options == RayConfig(namespace="team",
                                                                                     cpus_per_vcpu=0.5)


@pytest.mark.parametrize(("name", "values", "words"), [
    ("nope", {}, "Unknown backend 'nope': use one of local, ray."),
    ("ray", {"cpus_per_vcpu": -1.0}, "cpus_per_vcpu"),
])
def test_a_bad_choice_says_why(name: str, values: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        choose(name, values)
