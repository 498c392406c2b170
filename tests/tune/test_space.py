"""The setups pier tune tries (pure)."""

from __future__ import annotations

import pytest

from pier.tune.space import Recipe, Space


@pytest.mark.parametrize(
    ("vcpus", "splits"),
    [(1, [(1, 1)]), (2, [(1, 2), (2, 1)]), (6, [(1, 6), (2, 3), (3, 2), (6, 1)]),
     (32, [(1, 32), (2, 16), (4, 8), (8, 4), (16, 2), (32, 1)])],
)
def test_splits_use_every_vcpu(vcpus: int, splits: list[tuple[int, int]]) -> None:
    assert Space(vcpus).splits() == splits


def test_candidates_alternate_splits_so_a_short_budget_sees_both() -> None:
    found = Space(2, parallel=(4, 8), kv_types=("f16",)).candidates()
    assert [(c.copies, c.threads, c.parallel) for c in found] == [(1, 2, 4), (2, 1, 4), (1, 2, 8), (2, 1, 8)]


def test_every_combination_once() -> None:
    space = Space(4, parallel=(4, 8), batch_tokens=(256, 512), kv_types=("f16", "q8_0"), prefix_cache=(True, False),
                  omp=("spin", "passive"))
    found = space.candidates()
    assert len(found) == len(set(found)) == 3 * 2 * 2 * 2 * 2 * 2


def test_a_candidate_is_an_environment_and_a_stable_key() -> None:
    candidate = Recipe(copies=2, threads=1, parallel=8, batch_tokens=256, kv_type="q8_0", prefix_cache=False,
                          omp="passive")
    assert candidate.environment(2048) == {
        "PIER_PARALLEL": "8", "PIER_BATCH_TOKENS": "256", "MAX_BATCH_TOTAL_TOKENS": "2048",
        "PIER_KV_CACHE_TYPE": "q8_0", "PIER_PREFIX_CACHE": "false", "OMP_WAIT_POLICY": "passive"}
    assert "OMP_WAIT_POLICY" not in Recipe(1, 2, 8).environment(4096)  # spin: OpenMP's default, unset
    assert candidate.key == Recipe(2, 1, 8, 256, "q8_0", False, "passive").key != Recipe(2, 1, 8).key
    assert candidate.concurrency == 16 and candidate.label == "2x1t p8 b256 q8_0 nocache passive"


@pytest.mark.parametrize(("vcpus", "gpus", "layouts"), [
    (8, 0, [(1, 8, 0), (2, 4, 0), (4, 2, 0), (8, 1, 0)]),  # no GPUs: the splits of the cores
    (8, 1, [(1, 8, 1)]),  # ml.g5.2xlarge
    (48, 4, [(1, 48, 4), (2, 24, 2), (4, 12, 1)]),  # ml.g5.12xlarge: copies x GPUs, each with its share of cores
    (96, 8, [(1, 96, 8), (2, 48, 4), (4, 24, 2), (8, 12, 1)]),  # ml.p4d.24xlarge
    (2, 4, [(1, 2, 4), (2, 1, 2), (4, 1, 1)]),  # fewer cores than copies: one thread each at least
])
def test_on_gpus_the_search_splits_copies_by_gpus(vcpus: int, gpus: int, layouts: list[tuple[int, int, int]]) -> None:
    assert Space(vcpus, gpus=gpus).layouts() == layouts
    found = Space(vcpus, parallel=(8,), kv_types=("f16",), gpus=gpus).candidates()
    assert [(c.copies, c.threads, c.gpus) for c in found] == layouts


def test_a_gpu_candidate_has_its_own_key_and_label_and_a_cpu_one_keeps_its_key() -> None:
    on_gpus = Recipe(copies=4, threads=12, parallel=8, gpus=1)
    assert on_gpus.label == "4x12t/1g p8 b512 f16" and on_gpus.key != Recipe(4, 12, 8).key
    assert Recipe(2, 1, 8).key == "997902f9a2"  # as before GPUs were searched: old state files still match

