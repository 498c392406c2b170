"""`pier build-model`: test and benchmark models without downloading anything."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pier.cli.app import app, console

SHAPES = ("tiny", "small", "bench-360m")


@app.command("build-model")
def build_model(
    path: Annotated[Path, typer.Argument(help="Where to write the .gguf file.")],
    shape: Annotated[str, typer.Option(help=f"One of {', '.join(SHAPES)}.")] = "small",
    quant: Annotated[str, typer.Option(help="Q4_0, Q8_0, F16 or F32.")] = "Q4_0",
    seed: Annotated[int, typer.Option(help="Random seed for the weights.")] = 0,
) -> None:
    """Write a llama-architecture GGUF with RANDOM weights (for tests, demos and benchmarks; it talks nonsense)."""
    from pier.synthetic import builder as synthetic

    shapes = {"tiny": synthetic.TINY, "small": synthetic.SMALL, "bench-360m": synthetic.BENCH_360M}
    if shape not in shapes:
        raise typer.BadParameter(f"unknown shape {shape!r}: use one of {', '.join(SHAPES)}", param_hint="--shape")
    with console.status(f"Writing a {shape} {quant} model with random weights to {path} ..."):
        written = synthetic.build_gguf(path, shapes[shape], quant=quant, seed=seed)
    console.print(f"[green]Wrote[/] {written} ({written.stat().st_size / 1e6:.1f} MB, random weights)")


def demo_model(state_dir: Path) -> Path:
    """The small random-weights model `--demo` serves, built once under the state folder."""
    from pier.synthetic import builder as synthetic

    path = state_dir / "models" / "demo-small-q4_0.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with console.status("Building the demo model (random weights, so its answers are nonsense) ..."):
            synthetic.build_gguf(path, synthetic.SMALL, quant="Q4_0")
    console.print(f"[yellow]Demo model[/] {path}: RANDOM weights, it speaks gibberish; serve a real GGUF for answers.")
    return path
