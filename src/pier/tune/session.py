"""One `pier tune` invocation: the question, a gateway to try candidates on, the search, and what it leaves.

The gateway is one given by URL or, by default, one of its own in a scratch state folder (stopped at the end
with every copy it started). Files go to `out`: `tune-state.json` (resumable), `tune.png`, and the winner's
deploy file `deploy.yaml`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console

from pier.bench.pricing import Price, resolve_price
from pier.control.instance_types import LOCAL, lookup
from pier.engine.kv_type import kv_type_problem
from pier.server.kv_budget import kv_shape
from pier.tune import tune_report
from pier.tune.objective import Bound
from pier.tune.space import Recipe, Space
from pier.tune.trial import Setup, TrialRunner, TrialTraffic, own_gateway
from pier.tune.trials import TrialStore
from pier.tune.tuner import Search


@dataclass(frozen=True)
class TuneRequest:
    setup: Setup
    space: Space
    workload: TrialTraffic
    bounds: tuple[Bound, ...]
    budget_s: float
    out: Path
    endpoint: str
    gateway: str | None = None
    price_per_hour: float | None = None
    min_repeats: int = 2
    port: int = 0


@dataclass(frozen=True)
class TuneOutcome:
    rows: list[tune_report.RecipeRow]
    verdict: str
    deploy_file: Path | None
    plot: Path | None
    price: Price | None


def vcpus_of(instance_type: str) -> int:
    """The vCPUs of one instance: this host's usable cores for `local`."""
    return lookup(instance_type).vcpus


def gpus_of(instance_type: str) -> int:
    """The GPUs of one instance: this host's for `local` (pier.gpus)."""
    return lookup(instance_type).accelerators


def gpus_to_use(instance_gpus: int, asked: int | None, build_advice: str | None) -> tuple[int, str | None]:
    """The GPUs each candidate layout shares out, and a note for the user. `asked` is `--gpus` (None: all the
    instance has); `build_advice` says why the installed llama.cpp cannot use GPUs (None: it can). A GPU layout on
    a build without a GPU backend fails every trial's load, so the search falls back to CPU layouts and says why;
    asking for GPUs such a build cannot use is refused with the fix."""
    if asked is not None and asked > instance_gpus:
        raise ValueError(f"--gpus {asked}: the instance has {instance_gpus} GPU(s); ask for at most that many")
    wanted = instance_gpus if asked is None else asked
    if not wanted or build_advice is None:
        return wanted, None
    if asked is not None:
        raise ValueError(f"--gpus {asked}: {build_advice}; or pass --gpus 0 to tune CPU layouts")
    return 0, f"{build_advice}. Tuning CPU layouts only (pass --gpus N once llama.cpp has a GPU backend)."


def price_of(request: TuneRequest) -> Price | None:
    itype = None if request.setup.instance_type == LOCAL else request.setup.instance_type
    return resolve_price(request.price_per_hour, itype, 1)


def tune(request: TuneRequest, console: Console) -> TuneOutcome:
    request.out.mkdir(parents=True, exist_ok=True)
    price = price_of(request)  # an unknown price fails here, before any trial
    question = {"model": request.setup.model, "instance_type": request.setup.instance_type,
                "context": request.setup.context, "slo": [str(b) for b in request.bounds],
                "workload": {k: str(v) for k, v in asdict(request.workload).items()}}
    store = TrialStore.open(request.out / "tune-state.json", question)
    candidates = usable(request.space.candidates(), request.setup, console)
    if store.trials:
        console.print(f"resuming: {len(store.trials)} trials already in {store.path}")
    with _gateway(request) as url:
        runner = TrialRunner(url, request.setup, request.workload, request.bounds)
        search = Search(candidates, store, runner.run, request.budget_s, request.min_repeats,
                        say=lambda line: console.print(f"  {line}"))
        standings = search.run()
    rows = tune_report.rows(standings, candidates, store.trials)
    console.print(tune_report.table(rows, price))
    verdict = tune_report.verdict(rows)
    console.print(verdict)
    if not rows:
        return TuneOutcome(rows, verdict, None, None, price)
    plot = tune_report.plot(rows, request.out / "tune.png")
    deploy = None
    if rows[0].standing.goodput > 0:
        deploy = tune_report.write_deploy_file(request.out / "deploy.yaml", request.endpoint, request.setup,
                                          rows[0].candidate)
        console.print(f"deploy file: {deploy} (pier deploy {deploy})")
    return TuneOutcome(rows, verdict, deploy, plot, price)


def usable(candidates: list[Recipe], setup: Setup, console: Console) -> list[Recipe]:
    """The candidates whose KV cache type the model takes (checked from a local GGUF's header, as the copy would
    refuse it): a refused one would cost a deploy that never comes up."""
    path = Path(setup.model)
    if not path.is_file():
        return candidates
    shape = kv_shape(path)
    kept = []
    for candidate in candidates:
        problem = kv_type_problem(candidate.kv_type, None, shape)
        if problem:
            console.print(f"  skipped {candidate.label}: {problem}")
        else:
            kept.append(candidate)
    return kept


@contextmanager
def _gateway(request: TuneRequest) -> Iterator[str]:
    if request.gateway:
        yield request.gateway.rstrip("/")
        return
    with tempfile.TemporaryDirectory(prefix="pier-tune-") as scratch:
        port = request.port or _free_port()
        with own_gateway(Path(scratch) / "state", port, request.out / "tune-gateway.log") as url:
            yield url


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_duration(text: str) -> float:
    """`10m`, `90s`, `1h`, `1h30m` or plain seconds -> seconds."""
    import re

    cleaned = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", cleaned):
        return float(cleaned)
    parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", cleaned)
    if not parts or "".join(n + u for n, u in parts) != cleaned:
        raise ValueError(f"--budget {text!r}: write a duration such as 10m, 90s, 1h30m")
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
