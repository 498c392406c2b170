"""A server that is down, answers 500, or cuts its streams is measured as errors by code; the run still writes
its results."""

from __future__ import annotations

import asyncio
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from rich.console import Console

from pier.bench import BenchOptions, run_bench
from pier.bench.bench_run import Bench, PreparedTarget
from pier.bench.options import Level
from pier.bench.progress import LiveProgress
from pier.bench.report import REQUESTS_FILE, SUMMARY_FILE
from pier.bench.result import RunResult
from tests.bench.conftest import serving
from tests.sockets import free_port

BODY = b'{"error": {"message": "the engine is on fire", "type": "server_error", "code": null}}'
TOKEN = b'data: {"choices": [{"index": 0, "text": " a", "finish_reason": null}]}\n\n'


class Fails500(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


class CutsStreams(Fails500):
    """Starts every answer, sends one token, and hangs up."""

    def _answer(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(TOKEN)
        self.wfile.flush()
        self.close_connection = True


def bench(target: str, out: Path) -> dict:  # type: ignore[type-arg]
    result = run_bench(
        BenchOptions(
            target=target,
            concurrency=(1, 2),
            requests=3,
            warmup=1,
            input_len=4,
            output_len=2,
            timeout_s=5,
            out=out,
            progress=False,
        )
    )
    assert not result.ok
    return json.loads((out / SUMMARY_FILE).read_text())


def test_a_closed_port_is_counted_as_connection_errors(tmp_path: Path) -> None:
    summary = bench(f"http://127.0.0.1:{free_port()}", tmp_path)
    assert [run["results_error_code_frequency"] for run in summary["runs"]] == [{"connection_error": 3}] * 2
    assert all(run["results_num_completed_requests"] == 0 for run in summary["runs"])
    assert summary["targets"][0]["warmup_errors"] == {"connection_error": 1}
    assert summary["targets"][0]["prompt_tokens_verified"] is False
    requests = json.loads((tmp_path / REQUESTS_FILE).read_text())
    assert len(requests) == 6 and all("is the server running" in r["error_msg"] for r in requests)


def test_500s_are_counted_by_status(tmp_path: Path) -> None:
    with serving(Fails500) as url:
        summary = bench(url, tmp_path)
    for run in summary["runs"]:
        assert run["results_error_code_frequency"] == {"500": 3}
        assert run["results_error_rate"] == 1.0
        assert run["success_rate"] == 0.0
    requests = json.loads((tmp_path / REQUESTS_FILE).read_text())
    assert {r["error_msg"] for r in requests} == {"the engine is on fire"}


def test_streams_cut_short_are_counted(tmp_path: Path) -> None:
    with serving(CutsStreams) as url:
        summary = bench(url, tmp_path)
    assert [run["results_error_code_frequency"] for run in summary["runs"]] == [{"stream_cut": 3}] * 2
    assert (tmp_path / "throughput_vs_concurrency.png").stat().st_size > 0


class InterruptedAtLevelTwo(Bench):
    async def _run(self, prepared: PreparedTarget, level: Level, repeat: int, live: LiveProgress) -> RunResult:
        if level.value == 2:
            raise asyncio.CancelledError  # what Ctrl-C does to the running task
        return await super()._run(prepared, level, repeat, live)


def test_an_interrupted_benchmark_keeps_and_writes_the_runs_that_finished(tmp_path: Path) -> None:
    options = BenchOptions(
        target=f"http://127.0.0.1:{free_port()}",
        concurrency=(1, 2),
        requests=1,
        warmup=0,
        timeout_s=5,
        out=tmp_path,
        progress=False,
    )
    result = asyncio.run(InterruptedAtLevelTwo(options, Console()).run())
    assert result.interrupted
    assert [run.level.value for run in result.runs] == [1]
    assert json.loads((tmp_path / SUMMARY_FILE).read_text())["interrupted"] is True
