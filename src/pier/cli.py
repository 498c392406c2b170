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


if __name__ == "__main__":
    app()
