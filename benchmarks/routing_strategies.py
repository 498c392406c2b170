"""How much of a conversation's prompt each routing strategy lets the copies' prefix caches serve.

    python benchmarks/routing_strategies.py          # TINY model, 2 copies, 7 chats of 4 turns, sequential
    python benchmarks/routing_strategies.py --copies 4 --chats 16 --kv-tokens 6144 --restart \
        --strategies default,PREFIX_AWARE,KV_AWARE   # KV_AWARE against PREFIX_AWARE (issue 26)

Model servers (two by default) on pier's engine and the gateway's runtime over them, in this process. For each
strategy, fresh copies and the same set of chats (each with its own ~1,500-character system prompt) are played turn
by turn, the chats interleaved (in another order each turn), one request at a time; the copies' engine statistics
give the prompt tokens admitted and the part served from their prefix caches. A turn reuses its chat's previous
turns only on the copy that served them, so the fraction is what the strategy keeps together. The host-memory tier
is off, so only the KV cache counts.

`--kv-tokens` gives each copy a small KV cache, so a copy sent more chats than it holds evicts some; `--restart`
replaces the gateway halfway through the turns, so a strategy that routes on the gateway's memory starts over while
KV_AWARE learns from the copies' answers (X-Pier-Kv-Held) what each still holds.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from common import free_port
from fastapi import FastAPI

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.http_api import openai_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.routing_strategy import Routing, Strategy
from pier.runtime.target import Target
from pier.server.app import create_app
from pier.server.container import start_engine
from pier.server.server_state import ServerState
from pier.server.settings import ServerSettings
from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.words import WORDS

STRATEGIES = {
    "default (least outstanding, prefix-affine)": Routing(),
    "LEAST_OUTSTANDING_REQUESTS": Routing(Strategy.LEAST_OUTSTANDING_REQUESTS),
    "RANDOM": Routing(Strategy.RANDOM),
    "PREFIX_AWARE (1024, 4)": Routing(Strategy.PREFIX_AWARE, 1024, 4),
    "KV_AWARE": Routing(Strategy.KV_AWARE),
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
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--kv-tokens", type=int, default=16384, help="each copy's KV cache, in tokens")
    parser.add_argument("--restart", action="store_true", help="a fresh gateway halfway through the turns")
    parser.add_argument("--strategies", default="", help="comma-separated name prefixes (default: all)")
    args = parser.parse_args()
    wanted = [w for w in args.strategies.split(",") if w]
    chosen = {n: r for n, r in STRATEGIES.items() if not wanted or any(n.startswith(w) for w in wanted)}
    settings = ServerSettings(max_batch_total_tokens=args.kv_tokens, host_cache_mb=0, threads=1, model_name="tiny")
    print(f"{args.chats} chats of {args.turns} turns on {args.copies} fresh copies per strategy "
          f"({args.kv_tokens} KV tokens each), one request at a time"
          + (", the gateway restarted halfway" if args.restart else ""))
    with tempfile.TemporaryDirectory() as folder:
        gguf = build_gguf(Path(folder) / "tiny.gguf", TINY, quant="Q8_0")
        for name, routing in chosen.items():
            started = time.monotonic()
            game = Game(args.copies, args.turns, args.restart)
            prompt, cached = game.play(settings, gguf, routing, chats(0, args.chats))  # the same chats for each
            print(f"{name:44s} prompt tokens {prompt:6d}, from the prefix caches {cached:6d} "
                  f"({cached / prompt:5.1%}), chats per copy on the first turn {game.spread}, "
                  f"{time.monotonic() - started:4.0f} s")


@dataclass
class Game:
    copies: int
    turns: int
    restart: bool
    spread: list[int] = field(default_factory=list)  # chats each copy served on the first turn

    def play(self, settings: ServerSettings, gguf: Path, routing: Routing,
             conversations: list[list[dict[str, str]]]) -> tuple[int, int]:
        """The chats' turns through a gateway over fresh copies (the engine's cache budget learns as it goes, so
        every strategy starts from the same state); the prompt tokens admitted and those served from the caches."""
        with ExitStack() as stack:
            engines = [start_engine(settings, gguf) for _ in range(self.copies)]
            for engine in engines:
                stack.callback(engine.stop)
            apps = [create_app(settings, engine=engine) for engine in engines]
            urls = [stack.enter_context(serving(app, free_port())) for app in apps]
            copies = [CopyStatus(f"copy-{i}", "ic", CopyState.READY, url, pid=1) for i, url in enumerate(urls)]
            target = Target(copies, "ic", "AllTraffic", routing)
            gateway = ExitStack()
            base = _gateway(gateway, target)
            for turn in range(self.turns):
                if self.restart and turn == self.turns // 2:  # its router's memory goes with it
                    gateway.close()
                    gateway = ExitStack()
                    base = _gateway(gateway, target)
                before = [stats(app)["prompt"] for app in apps]
                # Users answer in their own time: each turn comes in another order, the same for every strategy.
                for messages in random.Random(turn).sample(conversations, len(conversations)):
                    messages.append({"role": "user", "content": f"turn {turn}: " + " ".join(WORDS[:8])})
                    answer = httpx.post(base, json={"model": "x", "messages": messages, "max_tokens": 8,
                                                    "temperature": 0}, timeout=120).json()
                    messages.append(answer["choices"][0]["message"])
                    if turn == 0:
                        after = [stats(app)["prompt"] for app in apps]
                        self.spread.append(next(i for i, (a, b) in enumerate(zip(after, before, strict=True))
                                                if a > b))
                        before = after
            gateway.close()
            self.spread = [self.spread.count(i) for i in range(self.copies)]
            totals = [stats(app) for app in apps]
            return sum(t["prompt"] for t in totals), sum(t["cached"] for t in totals)


def _gateway(stack: ExitStack, target: Target) -> str:
    service = RuntimeService(lambda endpoint, component, variant: target)
    gateway = FastAPI()
    gateway.include_router(openai_api(service))
    return stack.enter_context(serving(gateway, free_port())) + "/endpoints/chat/v1/chat/completions"


def stats(app: FastAPI) -> dict[str, Any]:
    state: ServerState = app.state.pier
    assert state.model is not None
    engine_stats = state.model.engine.stats()
    return {"prompt": engine_stats.prompt_tokens, "cached": engine_stats.cached_prompt_tokens}


if __name__ == "__main__":
    main()
