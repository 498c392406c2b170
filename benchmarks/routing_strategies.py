"""How much of a conversation's prompt each routing strategy lets the copies' prefix caches serve.

    python benchmarks/routing_strategies.py          # TINY model, 2 copies, 7 chats of 4 turns, sequential

Two model servers on pier's engine and the gateway's runtime over them, in this process. For each strategy, fresh
copies and a fresh set of chats (each with its own ~1,500-character system prompt) is played turn by turn, the chats
interleaved, one request at a time; the copies' engine statistics give the prompt tokens admitted and the part
served from their prefix caches. A turn reuses its chat's previous turns only on the copy that served them, so the
fraction is what the strategy keeps together. The host-memory tier is off, so only the KV cache counts.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from common import free_port
from fastapi import FastAPI

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.invoke import RuntimeService
from pier.runtime.routes import openai_router
from pier.runtime.routing import Routing, Strategy
from pier.runtime.target import Target
from pier.server.app import create_app
from pier.server.container import start_engine
from pier.server.settings import ServerSettings
from pier.server.state import ServerState
from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.words import WORDS

STRATEGIES = {
    "default (least outstanding, prefix-affine)": Routing(),
    "LEAST_OUTSTANDING_REQUESTS": Routing(Strategy.LEAST_OUTSTANDING_REQUESTS),
    "RANDOM": Routing(Strategy.RANDOM),
    "PREFIX_AWARE (1024, 4)": Routing(Strategy.PREFIX_AWARE, 1024, 4),
}


@contextmanager
def serving(app: FastAPI, port: int) -> Iterator[str]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def chats(seed: int, count: int) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    return [[{"role": "system", "content": " ".join(rng.choice(WORDS) for _ in range(260))}] for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=7)  # odd: least outstanding cannot keep chats on a copy by parity
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    settings = ServerSettings(max_batch_total_tokens=16384, host_cache_mb=0, threads=1, model_name="tiny")
    print(f"{args.chats} chats of {args.turns} turns on 2 fresh copies per strategy, one request at a time")
    with tempfile.TemporaryDirectory() as folder:
        gguf = build_gguf(Path(folder) / "tiny.gguf", TINY, quant="Q8_0")
        for seed, (name, routing) in enumerate(STRATEGIES.items()):
            prompt, cached = play(settings, gguf, routing, chats(seed, args.chats), args.turns)
            print(f"{name:44s} prompt tokens {prompt:6d}, from the prefix caches {cached:6d} "
                  f"({cached / prompt:5.1%})")


def play(settings: ServerSettings, gguf: Path, routing: Routing, conversations: list[list[dict[str, str]]],
         turns: int) -> tuple[int, int]:
    """The chats' turns through a gateway over two fresh copies (the engine's cache budget learns as it goes, so
    every strategy starts from the same state); the prompt tokens admitted and those served from the caches."""
    with ExitStack() as stack:
        engines = [start_engine(settings, gguf) for _ in range(2)]
        for engine in engines:
            stack.callback(engine.stop)
        apps = [create_app(settings, engine=engine) for engine in engines]
        urls = [stack.enter_context(serving(app, free_port())) for app in apps]
        copies = [CopyStatus(f"copy-{i}", "ic", CopyState.READY, url, pid=1) for i, url in enumerate(urls)]
        target = Target(copies, "ic", "AllTraffic", routing)
        service = RuntimeService(lambda endpoint, component, variant: target)
        gateway = FastAPI()
        gateway.include_router(openai_router(service))
        base = stack.enter_context(serving(gateway, free_port())) + "/endpoints/chat/v1/chat/completions"
        for turn in range(turns):
            for messages in conversations:
                messages.append({"role": "user", "content": f"turn {turn}: " + " ".join(WORDS[:8])})
                answer = httpx.post(base, json={"model": "x", "messages": messages, "max_tokens": 8,
                                                "temperature": 0}, timeout=120).json()
                messages.append(answer["choices"][0]["message"])
        totals = [stats(app) for app in apps]
        return sum(t["prompt"] for t in totals), sum(t["cached"] for t in totals)


def stats(app: FastAPI) -> dict[str, Any]:
    state: ServerState = app.state.pier
    assert state.model is not None
    engine_stats = state.model.engine.stats()
    return {"prompt": engine_stats.prompt_tokens, "cached": engine_stats.cached_prompt_tokens}


if __name__ == "__main__":
    main()
