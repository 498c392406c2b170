"""The issue-26 table's pure parts: pier's engine step lines under each row."""

from __future__ import annotations

import math

from engine_steps import EngineSteps
from many_cores import ROWS, engine_lines


def test_engine_lines_show_each_pier_copy_with_steps_and_leave_out_the_rest() -> None:
    after = {("pier_engine_step_seconds", "decode"): {0.001: 0.0, 0.002: 50.0, math.inf: 50.0},
             ("pier_engine_step_seconds", "mixed"): {0.01: 0.0, 0.02: 4.0, math.inf: 4.0}}
    lines = engine_lines({"pier": EngineSteps.between({}, after), "pier before": EngineSteps.between({}, {})})
    assert lines[-2] == "| pier | 1.5 / 2.0 (50) | 15.0 / 19.9 (4) | – |"
    assert not any("pier before" in line for line in lines)  # older sources without the metrics: no row
    assert engine_lines({"pier before": EngineSteps.between({}, {})}) == []


def test_the_system_prompt_row_gives_llama_server_the_cells_its_slots_need() -> None:
    mtsys = next(r for r in ROWS if r.name == "mtsys")
    assert mtsys.system == 1000 and mtsys.cells >= mtsys.parallel * (mtsys.system + 4 * (64 + 32))
