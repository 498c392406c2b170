"""`pier tune` on a model whose vocabulary holds few English words: each trial's bench reads its prompt words
from the endpoint's /tokenize on the gateway, so a short budget runs every trial (before, calibration took nearly
three minutes of each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pier.synthetic.builder import TINY, build_gguf
from tests.server.processes import pier_environment
from tests.tune.test_tune_e2e import pier

pytestmark = pytest.mark.e2e


def test_a_short_budget_runs_every_trial(tmp_path: Path) -> None:
    model = build_gguf(tmp_path / "random-vocab.gguf", TINY, quant="Q8_0", name="pier-random-test", words=())
    out = tmp_path / "tune"
    tuned = pier("tune", str(model), "--slo", "ttft_p90<30s,tpot_p90<5s", "--parallel", "2,4", "--kv-types", "f16",
                 "--requests", "4", "--input-len", "48", "--output-len", "4", "--context", "512", "--memory-mb", "256",
                 "--repeats", "1", "--endpoint", "tuned-rnd", "--out", str(out), "--budget", "60s",
                 env=pier_environment(OMP_WAIT_POLICY="passive", COLUMNS="200"), timeout=180)
    assert tuned.returncode == 0, tuned.stderr
    trials = json.loads((out / "tune-state.json").read_text())["trials"]
    assert len(trials) >= 2 and all(t["throughput"] > 0 for t in trials), tuned.stderr
    assert all(t["seconds"] < 30 for t in trials), trials  # deploy, bench and delete
