"""`pier state check`, `pier state backup` and `pier state restore`: the gateway's state file, looked after."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from pier.cli.app import app, console

state_app = typer.Typer(help="Check, back up and restore the gateway's state (its SQLite file).",
                        no_args_is_help=True)
app.add_typer(state_app, name="state")

StateDir = Annotated[Path | None, typer.Option(help="The gateway's state folder (default ~/.pier).")]


def _folder(state_dir: Path | None) -> Path:
    from pier.gateway.run import DEFAULT_STATE_DIR

    return (state_dir or DEFAULT_STATE_DIR).expanduser()


def _when(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@state_app.command("check")
def check(state_dir: StateDir = None) -> None:
    """Check the state: SQLite's integrity check, its schema version, and every record as the gateway reads it.

    Exits 1 when something is wrong, and says what to do about it."""
    from pier.control import backups

    report = backups.check(_folder(state_dir))
    console.print(f"[bold]{report.path}[/]" + (f" (state schema {report.version})" if report.version else ""))
    for problem in report.problems:
        console.print(f"  [red]damaged:[/] {problem}")
    for table, count in report.records.items():
        console.print(f"  {table}: {count} record{'s' if count != 1 else ''}")
    for row in report.unreadable:
        console.print(f"  [red]unreadable {row.kind} {row.name}:[/] {row.reason}")
    console.print(f"  backups: {len(report.backups)}"
                  + (f", newest {report.backups[-1].name} ({_when(report.backups[-1])})" if report.backups else ""))
    if report.ok:
        console.print("[green]ok[/]")
        return
    console.print(report.advice())
    raise typer.Exit(1)


@state_app.command("backup")
def backup(state_dir: StateDir = None) -> None:
    """Back the state up now (safe while a gateway runs); the oldest generations past the kept number go."""
    from pier.control import backups
    from pier.control.state import STATE_FILE, StateError

    policy = backups.BackupPolicy.from_env()
    try:
        made = backups.backup(_folder(state_dir) / STATE_FILE, policy.keep)
    except StateError as error:
        console.print(f"[red]{error.message}[/]")
        raise typer.Exit(1) from None
    console.print(f"[green]Backed up[/] to {made}")


@state_app.command("restore")
def restore(
    backup: Annotated[Path | None, typer.Argument(
        help="A backup file, or its name under <state-dir>/backups (default: the newest that is sound).")] = None,
    state_dir: StateDir = None,
) -> None:
    """Put a backup in place of the state file, after moving the current file aside (stop the gateway first).

    What changed since that backup is lost; the file moved aside is kept."""
    from pier.control import backups
    from pier.control.state import StateError

    folder = _folder(state_dir)
    try:
        restored = backups.restore(folder, backup)
    except StateError as error:
        console.print(f"[red]{error.message}[/]")
        raise typer.Exit(1) from None
    for moved in restored.moved:
        console.print(f"  moved aside: {moved}")
    console.print(f"[green]Restored[/] {restored.backup} ({_when(restored.backup)}) to {restored.state}.")
    console.print(f"Start the gateway again: pier up --state-dir {folder}")
