"""`pier tune`: search copies, threads (copies x GPUs on an instance with GPUs) and engine settings for the most
goodput within an SLO."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.app import app, console

Opt = typer.Option


def _numbers(text: str, flag: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"{flag} takes a list of integers, e.g. 4,8,16") from None


def _build_advice() -> str | None:
    """Why this host's llama.cpp build cannot use its GPUs, if it cannot (the copies run here)."""
    from pier.gpus import discover, gpu_build_advice

    return gpu_build_advice(discover())


def _words(text: str) -> tuple[str, ...]:
    return tuple(x.strip().lower() for x in text.split(",") if x.strip())


@app.command("tune")
def tune(
    model: Annotated[str, typer.Argument(help="The model to serve: a GGUF path, file://, s3:// or hf:// URL.")],
    instance_type: Annotated[str, Opt(help="The instance to fill: 'local' (this host) or an ml.* type.")] = "local",
    slo: Annotated[str, Opt(help="Latency objectives every trial must meet, e.g. ttft_p90<2s,tpot_p90<150ms "
                                 "(ttft, tpot, itl, e2el; p25-p99).")] = "ttft_p90<2s,tpot_p90<150ms",
    workload: Annotated[str, Opt(help="random, shared-prefix or multi-turn (pier bench's workloads).")] = "random",
    input_len: Annotated[int, Opt(min=1, help="Prompt tokens.")] = 256,
    output_len: Annotated[int, Opt(min=1, help="Output tokens.")] = 64,
    shared_prefix: Annotated[int, Opt(min=0, help="Shared system-prompt tokens (shared-prefix).")] = 0,
    turns: Annotated[int, Opt(min=1, help="Turns per conversation (multi-turn).")] = 4,
    requests: Annotated[int, Opt(min=1, help="Requests per trial (at least twice the users).")] = 32,
    budget: Annotated[str, Opt(help="Time for the whole search, e.g. 10m; what is left over is resumable.")] = "10m",
    parallel: Annotated[str, Opt(help="Parallel sequences per copy to try.")] = "4,8,16",
    batch_tokens: Annotated[str, Opt(help="Tokens per forward pass to try.")] = "512",
    kv_types: Annotated[str, Opt(help="KV cache types to try: f16, q8_0, q4_0.")] = "f16,q8_0",
    prefix_cache: Annotated[str, Opt(help="Prefix cache settings to try: on, off.")] = "on",
    omp: Annotated[str, Opt(help="OpenMP wait policies to try: spin (OpenMP's default), passive.")] = "spin",
    context: Annotated[int, Opt(min=256, help="KV cells per copy.")] = 4096,
    memory_mb: Annotated[int, Opt(min=128, help="Memory each copy reserves on the instance.")] = 1024,
    repeats: Annotated[int, Opt(min=1, help="Trials the winner needs at least (noise).")] = 2,
    endpoint: Annotated[str, Opt(help="Endpoint name in the winner's deploy file.")] = "tuned",
    out: Annotated[Path, Opt(help="Folder for the state file, plot and deploy file.")] = Path("pier-tune"),
    gateway: Annotated[str | None, Opt(help="A running gateway to try candidates on (default: one of its own).")]
    = None,
    price_per_hour: Annotated[float | None, Opt(help="USD per instance-hour (default: the instance type's "
                                                     "list price; none for local).")] = None,
    concurrency: Annotated[int | None, Opt(min=1, help="Clients at once in every trial (default: as many as "
                                                       "the candidate's parallel sequences; give the load you will "
                                                       "serve to compare layouts at that load).")] = None,
    gpus: Annotated[int | None, Opt(min=0, help="GPUs of the instance the layouts share out (default: all it "
                                                "has; 0 tunes CPU layouts only).")] = None,
) -> None:
    """Find the setup of copies per instance, threads, parallel sequences, batch size, KV cache type, prefix
    cache and OpenMP policy that serves the most output tokens within the SLO, with short pier bench runs on
    real copies, pruning by successive halving; writes the winner as a deploy file for `pier deploy`."""
    from pier.bench.options import BenchError, WorkloadKind
    from pier.control.errors import ValidationError
    from pier.engine.kv_type import KV_TYPE_NAMES
    from pier.tune.objective import SloError, parse_slo
    from pier.tune.session import TuneRequest, gpus_of, gpus_to_use, parse_duration, vcpus_of
    from pier.tune.session import tune as run_tune
    from pier.tune.space import OMP_POLICIES, Space
    from pier.tune.trial import Setup, TrialError, TrialTraffic
    from pier.tune.trials import StateFileError

    try:
        bounds = parse_slo(slo)
        seconds = parse_duration(budget)
        vcpus = vcpus_of(instance_type)
        kinds = _words(kv_types)
        if bad := [k for k in kinds if k not in KV_TYPE_NAMES]:
            raise ValueError(f"--kv-types {bad}: use {', '.join(KV_TYPE_NAMES)}")
        policies = _words(omp)
        if bad := [p for p in policies if p not in OMP_POLICIES]:
            raise ValueError(f"--omp {bad}: use {', '.join(OMP_POLICIES)}")
        caches = tuple({"on": True, "off": False}[w] for w in _words(prefix_cache))
        instance_gpus = gpus_of(instance_type)
        use_gpus, note = gpus_to_use(instance_gpus, gpus, _build_advice() if instance_gpus else None)
        if note:
            console.print(f"[yellow]{note}[/]")
        request = TuneRequest(
            setup=Setup(model, instance_type, context, memory_mb),
            space=Space(vcpus, _numbers(parallel, "--parallel"), _numbers(batch_tokens, "--batch-tokens"),
                        kinds, caches, policies, use_gpus),
            workload=TrialTraffic(WorkloadKind(workload), input_len, output_len, requests, shared_prefix, turns,
                              concurrency),
            bounds=bounds, budget_s=seconds, out=out, endpoint=endpoint, gateway=gateway,
            price_per_hour=price_per_hour, min_repeats=repeats)
        outcome = run_tune(request, console)
    except KeyError as error:
        console.print(f"[red]--prefix-cache takes on and off; got {error}[/]")
        raise typer.Exit(2) from None
    except (SloError, ValueError, ValidationError, BenchError, StateFileError, TrialError) as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(2) from None
    raise typer.Exit(0 if outcome.deploy_file else 1)
