"""Proving kernel families in child processes: the comparison (pure), the verdict's cache, and real probes of a
real GGUF, with drills for the families that crash, hang or compute wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pier.engine import kernel_probe
from pier.engine.kernel_probe import Verdict, cached_verdict, compared, divergence, keep_verdict, parse_faults, prove
from pier.engine.kernels import KernelFamily, Probed, read_host
from pier.engine.llama import system_info

REPACK, PLAIN = KernelFamily.REPACK, KernelFamily.PLAIN
ROW = np.linspace(-4, 4, 64, dtype=np.float32)


@pytest.mark.parametrize(("logits", "reference", "expected"), [
    (ROW, ROW, 0.0),
    (ROW * 1.05, ROW, pytest.approx(0.05, rel=1e-4)),
    (-ROW, ROW, 2.0),
    (np.where(ROW > 3, np.nan, ROW), ROW, float("inf")),
    (ROW, np.full_like(ROW, np.inf), float("inf")),
    (ROW[:10], ROW, float("inf")),
])
def test_divergence(logits: np.ndarray, reference: np.ndarray, expected: float) -> None:
    assert divergence(logits, reference) == expected


def test_a_family_is_out_when_it_did_not_finish_or_strays_from_the_reference() -> None:
    assert compared(REPACK, ROW * 1.1, ROW, "") == Probed(REPACK, None)
    assert compared(REPACK, -ROW, ROW, "").problem == "give wrong logits (2.00 off the plain kernels' answer)"
    assert compared(REPACK, None, ROW, "crash on this host (SIGSEGV)") == Probed(REPACK, "crash on this host (SIGSEGV)")
    assert compared(PLAIN, ROW, None, "") == Probed(PLAIN, None)  # the reference itself: finite is all it can show
    assert compared(PLAIN, ROW * np.nan, None, "").problem == "give NaN or infinite logits"
    refused = compared(PLAIN, None, None, f"{kernel_probe.REFUSED} (exit code 1: bad file)")
    assert refused.refused and refused.problem is not None


@pytest.mark.parametrize(("text", "faults"), [
    ("", {}),
    ("repack:crash", {REPACK: "crash"}),
    (" amx:hang , plain:wrong ", {KernelFamily.AMX: "hang", PLAIN: "wrong"}),
])
def test_drills_are_read(text: str, faults: dict[KernelFamily, str]) -> None:
    assert parse_faults(text) == faults


@pytest.mark.parametrize("text", ["repack", "repack:explode", "avx:crash", "repack:crash,"[:-1] + ";plain:hang"])
def test_a_mistyped_drill_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="write family:kind pairs"):
        parse_faults(text)


def test_a_verdict_is_kept_whole_and_a_damaged_one_is_proven_again(tmp_path: Path) -> None:
    verdict = Verdict((Probed(REPACK, "crash on this host (SIGSEGV)"), Probed(PLAIN, None)))
    keep_verdict(tmp_path / "kernels", "k", verdict)
    assert cached_verdict(tmp_path / "kernels", "k") == verdict
    assert [p.name for p in (tmp_path / "kernels").iterdir()] == ["k.json"]  # no temporary file left
    (tmp_path / "kernels" / "k.json").write_text('{"version": 1, "trials": [{"family": "avx9"}]}')
    assert cached_verdict(tmp_path / "kernels", "k") is None
    assert cached_verdict(tmp_path / "kernels", "missing") is None


def test_a_kind_of_model_is_its_architecture_and_weight_types(tiny_gguf: Path, small_gguf: Path) -> None:
    assert kernel_probe.model_kind(tiny_gguf) == "llama:F32,Q8_0"
    assert kernel_probe.model_kind(small_gguf) == "llama:F32,Q4_0"


@pytest.mark.e2e
@pytest.mark.parametrize(("drill", "expected"), [
    ("", {REPACK: None, PLAIN: None}),
    ("repack:crash", {REPACK: "crash on this host (SIGSEGV)", PLAIN: None}),
    ("repack:wrong", {REPACK: "give wrong logits", PLAIN: None}),
    # the reference crashed first: the fastest family is still tried, alone
    ("plain:crash", {REPACK: None, PLAIN: "crash on this host (SIGSEGV)"}),
    ("repack:crash,plain:crash", {REPACK: "crash on this host (SIGSEGV)", PLAIN: "crash on this host (SIGSEGV)"}),
])
def test_real_probes_of_a_real_gguf(small_gguf: Path, monkeypatch: pytest.MonkeyPatch, drill: str,
                                    expected: dict[KernelFamily, str | None]) -> None:
    host = read_host(system_info())
    if host.families()[0] is not REPACK:
        pytest.skip(f"this host's build offers {host.families()}, not the repack family these drills are written for")
    monkeypatch.setenv(kernel_probe.FAULTS, drill)
    verdict = prove(small_gguf, host, threads=2)
    assert [t.family for t in verdict.trials] == [REPACK, PLAIN]
    for trial in verdict.trials:
        want = expected[trial.family]
        assert (trial.problem is None) if want is None else (trial.problem or "").startswith(want), trial


@pytest.mark.e2e
def test_a_family_that_hangs_is_out_after_the_timeout(tiny_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host = read_host(system_info())
    monkeypatch.setenv(kernel_probe.FAULTS, f"{host.families()[0].value}:hang")
    verdict = prove(tiny_gguf, host, threads=1, timeout_s=20)
    assert verdict.trials[0].problem == "hang on this host (no answer in 20 s)"
