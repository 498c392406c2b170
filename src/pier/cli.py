"""The `pier` command. It wires parts together and holds no logic of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

app = typer.Typer(help="pier: self-hosted LLM endpoints that speak SageMaker, TGI and OpenAI.", no_args_is_help=True)
console = Console(stderr=True)

SHAPES = ("tiny", "small", "bench-360m")


@app.command("build-model")
def build_model(
    path: Annotated[Path, typer.Argument(help="Where to write the .gguf file.")],
    shape: Annotated[str, typer.Option(help=f"One of {', '.join(SHAPES)}.")] = "small",
    quant: Annotated[str, typer.Option(help="Q4_0, Q8_0, F16 or F32.")] = "Q4_0",
    seed: Annotated[int, typer.Option(help="Random seed for the weights.")] = 0,
) -> None:
    """Write a llama-architecture GGUF with RANDOM weights (for tests, demos and benchmarks; it talks nonsense)."""
    from pier.model import synthetic

    shapes = {"tiny": synthetic.TINY, "small": synthetic.SMALL, "bench-360m": synthetic.BENCH_360M}
    if shape not in shapes:
        raise typer.BadParameter(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}", param_hint="--shape")
    with console.status(f"Writing a {shape} {quant} model with random weights to {path} ..."):
        written = synthetic.build_gguf(path, shapes[shape], quant=quant, seed=seed)
    console.print(f"[green]Wrote[/] {written} ({written.stat().st_size / 1e6:.1f} MB, random weights)")


def _serve(model: str | None, port: int | None, host: str | None, threads: int | None, parallel: int | None) -> None:
    from pier.server.container import serve_container

    raise typer.Exit(serve_container(model, port, host=host, threads=threads, parallel=parallel))


Port = Annotated[int | None, typer.Option(help="Port to listen on (default: SAGEMAKER_BIND_TO_PORT or 8080).")]
Threads = Annotated[int | None, typer.Option(help="Engine threads (default: the cores this process may use).")]
Parallel = Annotated[int | None, typer.Option(help="Sequences decoding at once (default 8).")]
ContainerModel = Annotated[
    str | None, typer.Option(help="Model folder or .gguf (default: SM_MODEL_DIR or /opt/ml/model).")]
ServeModel = Annotated[str | None, typer.Argument(
    help="A .gguf file or a model folder. Omit it to run as a SageMaker container (model from SM_MODEL_DIR "
    "or /opt/ml/model).")]
Demo = Annotated[bool, typer.Option(help="Build a small model with RANDOM weights and serve it (no download).")]
LocalHost = Annotated[str | None, typer.Option(help="Address to listen on (default 127.0.0.1 for a local model).")]
StateDir = Annotated[Path | None, typer.Option(help="Where pier keeps models and state (default ~/.pier).")]


@app.command("container")
def container(
    model: ContainerModel = None,
    port: Port = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 0.0.0.0).")] = None,
    threads: Threads = None,
    parallel: Parallel = None,
) -> None:
    """Run one model server exactly as a SageMaker inference container does (what `<image> serve` starts)."""
    _serve(model, port, host, threads, parallel)


@app.command("serve")
def serve(
    model: ServeModel = None,
    demo: Demo = False,
    port: Port = None,
    host: LocalHost = None,
    threads: Threads = None,
    parallel: Parallel = None,
    state_dir: StateDir = None,
) -> None:
    """Serve a model on this machine with the SageMaker, TGI and OpenAI APIs (one copy on this host)."""
    if model is None and not demo:
        _serve(None, port, host, threads, parallel)  # `<image> serve`: SageMaker's container entry
        return
    if model is not None and demo:
        raise typer.BadParameter("give a MODEL or --demo, not both", param_hint="--demo")
    if demo:
        model = str(_demo_model(state_dir or Path.home() / ".pier"))
    shown_port = port or 8080
    console.print(f"[bold]pier[/] serving {model} at http://127.0.0.1:{shown_port}")
    console.print(f"  OpenAI:    http://127.0.0.1:{shown_port}/v1  (chat/completions, completions, models)")
    console.print(f"  SageMaker: http://127.0.0.1:{shown_port}/invocations   TGI: /generate, /generate_stream")
    console.print(f"  Metrics:   http://127.0.0.1:{shown_port}/metrics   Stop with Ctrl-C.")
    _serve(model, port, host or "127.0.0.1", threads, parallel)


def _demo_model(state_dir: Path) -> Path:
    from pier.model import synthetic

    path = state_dir / "models" / "demo-small-q4_0.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with console.status("Building the demo model (random weights, so its answers are nonsense) ..."):
            synthetic.build_gguf(path, synthetic.SMALL, quant="Q4_0")
    console.print(f"[yellow]Demo model[/] {path}: RANDOM weights, it speaks gibberish; serve a real GGUF for answers.")
    return path


Opt = typer.Option


@app.command("bench")
def bench(
    target: Annotated[str, typer.Argument(help="A URL (any OpenAI-compatible server, a TGI or SageMaker route) "
                                               "or a pier endpoint name.")],
    concurrency: Annotated[str | None, Opt(help="Closed-loop users, a list: 1,2,4,8.")] = None,
    rate: Annotated[str | None, Opt(help="Open-loop Poisson request rates (req/s), a list: 0.5,1,2.")] = None,
    requests: Annotated[int | None, Opt(help="Requests per load level (default 32).")] = None,
    duration: Annotated[float | None, Opt(help="Seconds per load level (whichever of this and --requests "
                                               "comes first).")] = None,
    input_len: Annotated[int, Opt(min=1, help="Prompt tokens.")] = 64,
    output_len: Annotated[int, Opt(min=1, help="Output tokens (sent with ignore_eos).")] = 32,
    input_len_stddev: Annotated[float, Opt(min=0, help="Draw prompt lengths from a normal distribution.")] = 0.0,
    output_len_stddev: Annotated[float, Opt(min=0, help="Draw output lengths from a normal distribution.")] = 0.0,
    workload: Annotated[str, Opt(help="random, shared-prefix or multi-turn.")] = "random",
    shared_prefix: Annotated[int, Opt(min=0, help="Tokens of system prompt shared by all users.")] = 0,
    turns: Annotated[int, Opt(min=1, help="Turns per conversation (multi-turn).")] = 4,
    api: Annotated[str | None, Opt(help="openai-completions, openai-chat, tgi or sagemaker (default: from "
                                        "the URL).")] = None,
    payload: Annotated[str, Opt(help="Body sent through a SageMaker route: openai-chat, openai-completions, "
                                     "tgi.")] = "openai-chat",
    model: Annotated[str | None, Opt(help="Model name to send (default: the first of /v1/models).")] = None,
    compare: Annotated[str | None, Opt(help="A second server: same workload, runs interleaved, ratios.")] = None,
    repeats: Annotated[int | None, Opt(min=1, help="Runs per level (default 1, 2 with --compare).")] = None,
    warmup: Annotated[int, Opt(min=0, help="Warm-up requests before each run.")] = 2,
    timeout: Annotated[float, Opt(help="Seconds before a request counts as failed.")] = 60.0,
    seed: Annotated[int, Opt(help="Seed for prompts and lengths.")] = 0,
    prompt_format: Annotated[str, Opt(help="auto, ids (token ids) or text.")] = "auto",
    vocab: Annotated[Path | None, Opt(help="The model's GGUF, to build exact token-id prompts.")] = None,
    temperature: Annotated[float, Opt(min=0)] = 0.0,
    slo_ttft: Annotated[float | None, Opt(help="Goodput objective: TTFT in ms.")] = None,
    slo_tpot: Annotated[float | None, Opt(help="Goodput objective: TPOT in ms.")] = None,
    slo_e2el: Annotated[float | None, Opt(help="Goodput objective: end-to-end latency in ms.")] = None,
    price_per_hour: Annotated[float | None, Opt(help="Instance price, for cost per million tokens.")] = None,
    instance_type: Annotated[str | None, Opt(help="A SageMaker instance type, priced from pier's table.")] = None,
    instance_count: Annotated[int, Opt(min=1)] = 1,
    gateway: Annotated[str | None, Opt(help="Gateway URL for endpoint names (default: PIER_GATEWAY_URL or "
                                            "AWS_ENDPOINT_URL).")] = None,
    api_key: Annotated[str | None, Opt(envvar="OPENAI_API_KEY", help="Bearer token, never written out.")] = None,
    out: Annotated[Path | None, Opt(help="Write summary.json, requests.json and PNG plots here.")] = None,
    progress: Annotated[bool, Opt(help="Live progress display.")] = True,
) -> None:
    """Measure a server under load: TTFT, TPOT, ITL, latency, throughput, goodput, cost; JSON and plots."""
    from pydantic import ValidationError

    from pier.bench import BenchError, BenchOptions, run_bench
    from pier.bench.options import parse_numbers

    try:
        options = BenchOptions(
            target=target, api=api, model=model, compare=compare, gateway=gateway, api_key=api_key,
            concurrency=parse_numbers(concurrency, int, "--concurrency") if concurrency else (),
            rates=parse_numbers(rate, float, "--rate") if rate else (), requests=requests, duration_s=duration,
            warmup=warmup, repeats=repeats, timeout_s=timeout, seed=seed, workload=workload, input_len=input_len,
            input_len_stddev=input_len_stddev, output_len=output_len, output_len_stddev=output_len_stddev,
            shared_prefix=shared_prefix, turns=turns, prompt_format=prompt_format, vocab=vocab, payload=payload,
            temperature=temperature, slo_ttft_ms=slo_ttft, slo_tpot_ms=slo_tpot, slo_e2el_ms=slo_e2el,
            price_per_hour=price_per_hour, instance_type=instance_type, instance_count=instance_count, out=out,
            progress=progress,
        )
        result = run_bench(options)
    except BenchError as error:
        console.print(f"[red]error:[/] {error.message}")
        raise typer.Exit(2) from None
    except ValidationError as error:
        for problem in error.errors():
            console.print(f"[red]error:[/] {'.'.join(map(str, problem['loc']))}: {problem['msg']}")
        raise typer.Exit(2) from None
    raise typer.Exit(0 if result.ok else 1)


if __name__ == "__main__":
    app()
