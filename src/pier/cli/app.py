"""The typer app every `pier` command registers on, and the console they print to."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(help="pier: self-hosted LLM endpoints that speak SageMaker, TGI and OpenAI.", no_args_is_help=True)
console = Console(stderr=True, soft_wrap=True)  # human output (URLs stay whole); --json goes to stdout
listing = Console(soft_wrap=True)  # what a listing command was asked for (its table): stdout, to pipe or grep
