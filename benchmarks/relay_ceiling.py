"""The gateway's relay ceiling: how many streamed tokens per second one gateway process relays, and what each
relayed token costs it in CPU.

No model: each copy is a fake model server (`--role copy`) that streams tokens as fast as it can (or one every
`--interval-ms`), one SSE event per token, each carrying the time it was sent (`"t":NANOSECONDS`). With
`X-Pier-Resumable` (what the gateway asks by default) it answers in pier's frames (pier.channel.frames), one data frame
per token, as an engine copy does. The gateway is `pier up` itself (`--gateway pier-up`, the default: `python -m
pier.gateway` whose local backend starts the fake copy in place of the model server, the endpoint created through
its SageMaker control API), or only its runtime data plane (`--gateway plane`: RuntimeService with the SageMaker
runtime and OpenAI routes under uvicorn, which PIER_RELAY_PROFILE=PATH runs under cProfile). Many concurrent
streaming clients count the tokens they receive and the emit-to-receive delay; the gateway's CPU is read from
/proc. "direct" is the same clients against one copy, without the gateway.

    PYTHONPATH=src python3 benchmarks/relay_ceiling.py --copies 2 --clients 32 --seconds 10
    PYTHONPATH=src python3 benchmarks/relay_ceiling.py --clients 128 --tokens 100 --interval-ms 20  # paced
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import free_port, log

TOKEN_MARK = b'"t":'
SSE_MEDIA_TYPE = "text/event-stream"
PROFILE_ENV = "PIER_RELAY_PROFILE"  # a path: the gateway process runs under cProfile and writes its stats there
DUMP_PATH = "/relay-profile"


# -- the pure parts -------------------------------------------------------------------------------------------


def token_event(index: int, sent_ns: int) -> bytes:
    """One token as an OpenAI chat chunk; `t` is when the copy sent it (time.time_ns)."""
    return (b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"tok"}}],'
            b'"i":%d,"t":%d}\n\n' % (index, sent_ns))


@dataclass
class Tally:
    """What one client has received: tokens, and the emit-to-receive delays of the newest token in each chunk."""

    tokens: int = 0
    delays_s: list[float] | None = None

    def feed(self, chunk: bytes, now_ns: int) -> None:
        """Count the tokens in a chunk and sample the newest one's delay. A mark split across two reads is missed:
        the count errs low (conservative), by a handful of tokens in a run of 10^5."""
        self.tokens += chunk.count(TOKEN_MARK)
        at = chunk.rfind(TOKEN_MARK)
        if at < 0:
            return
        digits = chunk[at + len(TOKEN_MARK):at + len(TOKEN_MARK) + 19]
        if len(digits) == 19 and digits.isdigit():
            if self.delays_s is None:
                self.delays_s = []
            self.delays_s.append((now_ns - int(digits)) / 1e9)


def cpu_seconds(stat: str) -> float:
    """A process's user + system CPU seconds from the text of /proc/PID/stat."""
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(frozen=True)
class Ceiling:
    """One process's relay capacity from a measured cost per token, against what a host produces."""

    tokens_per_s: float
    cpu_s: float

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.tokens_per_s / self.cpu_s if self.cpu_s else float("inf")

    def processes_for(self, host_tokens_per_s: float) -> float:
        """Gateway processes (one core each, fully busy) needed to relay a host's tokens."""
        return host_tokens_per_s / self.tokens_per_cpu_s


# -- the fake copy --------------------------------------------------------------------------------------------


def copy_app(tokens: int, interval_s: float = 0.0, concurrency: int = 64) -> Any:
    """A raw ASGI model server: /ping, and any POST streams `tokens` tokens (framed when the gateway asks), one
    every `interval_s` (0: as fast as it can, so many reach the gateway in one read)."""
    from pier.channel.frames import FRAMES_MEDIA_TYPE, data_frame, head_frame
    from pier.channel.headers import CONCURRENCY_HEADER, FRAMED

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        if scope["method"] == "GET":
            # what a ready copy says it takes at once (pier.channel.headers), so the gateway queues nothing
            ping = [(CONCURRENCY_HEADER.lower().encode(), str(concurrency).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": ping})
            await send({"type": "http.response.body", "body": b""})
            return
        headers = dict(scope["headers"])
        framed = headers.get(b"x-pier-resumable") == b"1"
        if framed:
            start = [(b"content-type", FRAMES_MEDIA_TYPE.encode()), (FRAMED.lower().encode(), b"1")]
        else:
            start = [(b"content-type", SSE_MEDIA_TYPE.encode())]
        await send({"type": "http.response.start", "status": 200, "headers": start})
        if framed:
            await send({"type": "http.response.body", "more_body": True,
                        "body": head_frame(200, [("content-type", SSE_MEDIA_TYPE)])})
        for index in range(tokens):
            event = token_event(index, time.time_ns())
            await send({"type": "http.response.body", "more_body": True,
                        "body": data_frame([index], event) if framed else event})
            if interval_s:
                await asyncio.sleep(interval_s)
        done = b"data: [DONE]\n\n"
        await send({"type": "http.response.body", "body": data_frame([], done, last=True) if framed else done})

    return app


def serve_copy(port: int, tokens: int, interval_s: float, concurrency: int) -> None:
    import uvicorn

    uvicorn.run(copy_app(tokens, interval_s, concurrency), host="127.0.0.1", port=port, log_level="warning",
                access_log=False)


# -- the gateway ----------------------------------------------------------------------------------------------


def serve_gateway(port: int, copy_urls: Sequence[str], concurrency: int) -> None:
    import uvicorn
    from fastapi import FastAPI

    from pier.backends.base import CopyState, CopyStatus
    from pier.runtime.http_api import openai_api, runtime_api
    from pier.runtime.invoke import RuntimeService
    from pier.runtime.target import Target

    copies = [CopyStatus(f"relay-{i}", "relay", CopyState.READY, url=url, concurrency=concurrency)
              for i, url in enumerate(copy_urls)]

    def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
        return Target.of(endpoint, copies)

    service = RuntimeService(resolve)
    app = FastAPI()
    app.include_router(runtime_api(service))
    app.include_router(openai_api(service))
    app.get("/ping")(lambda: {"ok": True})
    if profile := os.environ.get(PROFILE_ENV):
        import cProfile

        profiler = cProfile.Profile()
        # uvicorn re-raises SIGTERM once it has stopped, so the driver asks for the stats before it ends this
        app.post(DUMP_PATH)(lambda: profiler.dump_stats(profile))
        profiler.enable()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_pier_up(args: argparse.Namespace) -> int:
    """`pier up` itself (python -m pier.gateway), whose local backend starts fake copies in place of the model
    server: everything else (control plane, supervisor, router, relay) is the real gateway's."""
    import pier.backends.process
    from pier.gateway.run import main as gateway_main

    def fake_copy(python: str, spec: Any, port: int) -> list[str]:
        return [python, __file__, "--role", "copy", "--port", str(port), "--tokens", str(args.tokens),
                "--interval-ms", str(args.interval_ms), "--concurrency", str(args.concurrency)]

    pier.backends.process.command = fake_copy
    return gateway_main(["--port", str(args.port), "--state-dir", args.state_dir, "--log-level", "warning"])


def deploy(gateway_url: str, model_dir: Path, copies: int, timeout_s: float = 120) -> None:
    """Endpoint `relay` of `copies` copies, created through the gateway's SageMaker control API."""
    import boto3

    control = boto3.client("sagemaker", endpoint_url=gateway_url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
    control.create_model(ModelName="relay", ExecutionRoleArn="arn:aws:iam::1:role/r", PrimaryContainer={
        "Image": "byoc", "ModelDataUrl": f"file://{model_dir}"})
    control.create_endpoint_config(EndpointConfigName="relay", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "relay", "InstanceType": "local",
        "InitialInstanceCount": copies}])
    control.create_endpoint(EndpointName="relay", EndpointConfigName="relay")
    control.get_waiter("endpoint_in_service").wait(EndpointName="relay", WaiterConfig={
        "Delay": 1, "MaxAttempts": int(timeout_s)})


# -- the driver -----------------------------------------------------------------------------------------------


@dataclass
class Run:
    name: str
    tokens: int
    seconds: float
    cpu_s: float  # the gateway's (0 when there is none)
    delays_s: list[float]

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


ROUTES = {
    "direct": "/v1/chat/completions",
    "sagemaker-stream": "/endpoints/relay/invocations-response-stream",
    "openai-chat": "/v1/chat/completions",
}
BODY = {"model": "relay", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def drive(name: str, url: str, clients: int, seconds: float, gateway_pid: int | None) -> Run:
    import httpx

    tallies = [Tally() for _ in range(clients)]
    stop_at = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(tally: Tally, http: httpx.AsyncClient) -> None:
        while time.monotonic() < stop_at:
            async with http.stream("POST", url, json=BODY) as response:
                response.raise_for_status()
                async for chunk in response.aiter_raw():
                    tally.feed(chunk, time.time_ns())

    stat = Path(f"/proc/{gateway_pid}/stat") if gateway_pid else None
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        cpu_before = cpu_seconds(stat.read_text()) if stat else 0.0
        started = time.monotonic()
        await asyncio.gather(*(client(t, http) for t in tallies))
        elapsed = time.monotonic() - started
        cpu = cpu_seconds(stat.read_text()) - cpu_before if stat else 0.0
    delays = [d for t in tallies for d in (t.delays_s or [])]
    return Run(name, sum(t.tokens for t in tallies), elapsed, cpu, delays)


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, __file__, *args], stdin=subprocess.DEVNULL)


async def wait_listening(url: str, timeout_s: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(url + "/ping", timeout=2)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer /ping within {timeout_s} s; see its output above")
            await asyncio.sleep(0.2)


def report(run: Run) -> dict[str, Any]:
    row = {"route": run.name, "tokens": run.tokens, "tokens_per_s": round(run.tokens_per_s),
           "gateway_cpu_s": round(run.cpu_s, 2),
           "gateway_cpu_share": round(run.cpu_s / run.seconds, 2),
           "tokens_per_gateway_cpu_s": round(run.tokens / run.cpu_s) if run.cpu_s else None,
           "delay_p50_ms": round(percentile(run.delays_s, 0.5) * 1e3, 2),
           "delay_p99_ms": round(percentile(run.delays_s, 0.99) * 1e3, 2)}
    log(json.dumps(row))
    return row


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    gateway_port = free_port()
    gateway_url = f"http://127.0.0.1:{gateway_port}"
    processes: list[subprocess.Popen[bytes]] = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="relay-ceiling-") as scratch:
        try:
            if args.gateway == "pier-up":
                gateway = spawn("--role", "pier-up", "--port", str(gateway_port), "--state-dir", f"{scratch}/state",
                                "--tokens", str(args.tokens), "--interval-ms", str(args.interval_ms),
                                "--concurrency", str(args.clients))
                processes.append(gateway)
                await wait_listening(gateway_url)
                await asyncio.to_thread(deploy, gateway_url, byoc_model(Path(scratch)), args.copies)
                copy_urls = await asyncio.to_thread(listed_copies, gateway_url)
            else:
                copy_urls = [f"http://127.0.0.1:{free_port()}" for _ in range(args.copies)]
                processes += [spawn("--role", "copy", "--port", url.rsplit(":", 1)[1], "--tokens", str(args.tokens),
                                    "--interval-ms", str(args.interval_ms), "--concurrency", str(args.clients))
                              for url in copy_urls]
                gateway = spawn("--role", "gateway", "--port", str(gateway_port), "--copy-urls", ",".join(copy_urls),
                                "--concurrency", str(args.clients))
                processes.append(gateway)
                for url in [*copy_urls, gateway_url]:
                    await wait_listening(url)
            await drive("warm-up", gateway_url + ROUTES["openai-chat"], 2, 1.0, None)
            rows.append(report(await drive("direct", copy_urls[0] + ROUTES["direct"], args.clients, args.seconds,
                                           None)))
            for name in ("sagemaker-stream", "openai-chat"):
                rows.append(report(await drive(name, gateway_url + ROUTES[name], args.clients, args.seconds,
                                               gateway.pid)))
            if os.environ.get(PROFILE_ENV) and args.gateway == "plane":
                import httpx

                httpx.post(gateway_url + DUMP_PATH, timeout=30)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(30)
    return rows


def byoc_model(root: Path) -> Path:
    """A bring-your-own-code model folder: what the control plane accepts without a GGUF (the fake copy never
    reads it)."""
    code = root / "model" / "code"
    code.mkdir(parents=True)
    (code / "inference.py").write_text("def predict_fn(data, model):\n    return data\n")
    return code.parent


def listed_copies(gateway_url: str) -> list[str]:
    import httpx

    copies = httpx.get(gateway_url + "/pier/copies", timeout=10).json()["copies"]
    return [copy["url"] for copy in copies if copy.get("url")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=["driver", "copy", "gateway", "pier-up"], default="driver")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--copy-urls", default="")
    parser.add_argument("--state-dir", default="")
    parser.add_argument("--gateway", choices=["pier-up", "plane"], default="pier-up",
                        help="pier-up: `pier up` itself, its local backend starting the fake copies; plane: only the "
                             "runtime data plane (RuntimeService) in front of copies started here (and --profile-able)")
    parser.add_argument("--concurrency", type=int, default=64, help="requests a copy takes at once")
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--clients", type=int, default=32, help="concurrent streaming clients")
    parser.add_argument("--tokens", type=int, default=200, help="tokens per answer")
    parser.add_argument("--interval-ms", type=float, default=0.0,
                        help="a copy's pause between tokens (20: 50 tok/s per stream, one token per read)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per route")
    parser.add_argument("--json", default="", help="also write the rows here")
    args = parser.parse_args()
    if args.role == "copy":
        serve_copy(args.port, args.tokens, args.interval_ms / 1e3, args.concurrency)
    elif args.role == "pier-up":
        sys.exit(serve_pier_up(args))
    elif args.role == "gateway":
        serve_gateway(args.port, args.copy_urls.split(","), args.concurrency)
    else:
        rows = asyncio.run(main_async(args))
        if args.json:
            with open(args.json, "w") as out:
                json.dump(rows, out, indent=2)
        log(f"mean delay over all routes: {statistics.fmean(r['delay_p50_ms'] for r in rows):.2f} ms (p50s)")


if __name__ == "__main__":
    main()
