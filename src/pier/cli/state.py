"""`pier state check`, `backup`, `restore` and `migrate`: the gateway's state folder, looked after (or moved
into PostgreSQL)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pier.cli.app import app, console

if TYPE_CHECKING:
    from pier.state_folder.files import Report

state_app = typer.Typer(help="Check, back up, restore and migrate the gateway's state folder (state.sqlite3, "
                             "autoscaling.sqlite3, keys.json).", no_args_is_help=True)
app.add_typer(state_app, name="state")

# PIER_STATE_DIR as `pier up` and `pier keys` read it: else a gateway refused for a damaged file in that folder
# would be checked, backed up or restored in ~/.pier
StateDir = Annotated[Path | None, typer.Option(envvar="PIER_STATE_DIR",
                                                help="The gateway's state folder (default ~/.pier).")]


def _folder(state_dir: Path | None) -> Path:
    from pier.gateway.run import DEFAULT_STATE_DIR

    return (state_dir or DEFAULT_STATE_DIR).expanduser()


def _when(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@state_app.command("check")
def check(
    state_dir: StateDir = None,
    state_url: Annotated[str | None, typer.Option(
        "--state-url", envvar="PIER_STATE_URL",
        help="Check the stores in this PostgreSQL database (postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE), "
             "as gateways started with --state-url keep them, instead of the folder's files.")] = None,
) -> None:
    """Check every file of the state folder (state.sqlite3, autoscaling.sqlite3, keys.json): SQLite's integrity
    check, the schema version, and every row (record, key) as the gateway reads it; with --state-url, every
    store's schema in that database (its version, its tables, every row).

    Exits 1 when something is wrong, and says what to do about it."""
    if state_url is not None:
        _check_database(state_url)
        return
    from pier.control import backups
    from pier.gateway.state_files import FILES

    reports = backups.check(_folder(state_dir), FILES)
    for report in reports:
        _print_report(report)
    if all(report.ok for report in reports):
        console.print("[green]ok[/]")
        return
    for report in reports:
        if not report.ok:
            console.print(report.advice())
    raise typer.Exit(1)


def _check_database(url: str) -> None:
    from pier.gateway.copy_board import CopyBoard
    from pier.gateway.key_table import KeyTable
    from pier.gateway.state_files import STORES
    from pier.state_folder.errors import StateError
    from pier.state_folder.postgres import is_url, shown
    from pier.state_folder.postgres_check import advice, check_database

    if not is_url(url):
        console.print(f"[red]--state-url {url!r} is not a PostgreSQL URL: give postgresql://USER@HOST/DATABASE.[/]")
        raise typer.Exit(2)
    try:
        reports = check_database(url, (*STORES, KeyTable, CopyBoard))
    except StateError as error:
        console.print(f"[red]{error.message}[/]")
        raise typer.Exit(1) from None
    console.print(f"The state database {shown(url)}:")
    for report in reports:
        _print_report(report, backups=False)
    if all(report.ok for report in reports):
        console.print("[green]ok[/]")
        return
    for report in reports:
        if not report.ok:
            console.print(advice(report, url))
    raise typer.Exit(1)


def _print_report(report: Report, *, backups: bool = True) -> None:
    version = f" (state schema {report.version})" if report.version else ""
    console.print(f"[bold]{report.path}[/]" + (version if report.present else " (none yet)"))
    for problem in report.problems:
        console.print(f"  [red]damaged:[/] {problem}")
    for table, count in report.records.items():
        console.print(f"  {table}: {count} record{'s' if count != 1 else ''}")
    for row in report.unreadable:
        console.print(f"  [red]unreadable {row.kind} {row.name}:[/] {row.reason}")
    if backups:
        console.print(f"  backups: {len(report.backups)}" + (
            f", newest {report.backups[-1].name} ({_when(report.backups[-1])})" if report.backups else ""))


@state_app.command("backup")
def backup(state_dir: StateDir = None) -> None:
    """Back every file of the state up now (safe while a gateway runs); the oldest generations past the kept
    number go."""
    from pier.control import backups
    from pier.gateway.state_files import FILES
    from pier.state_folder.errors import StateError

    policy = backups.BackupPolicy.from_env()
    folder = _folder(state_dir)
    failed = False
    for file in FILES:
        if not (folder / file.name).exists():
            continue
        try:
            made = backups.backup(file, folder / file.name, policy.keep)
        except (StateError, sqlite3.Error) as error:
            console.print(f"[red]{file.name}: {getattr(error, 'message', error)}[/]")
            failed = True
            continue
        console.print(f"[green]Backed up[/] {file.name} to {made}")
    if failed:
        raise typer.Exit(1)


@state_app.command("restore")
def restore(
    backup: Annotated[Path | None, typer.Argument(
        help="A backup file, or its name under <state-dir>/backups (default: for each file that needs it, the "
             "newest backup whose rows all read).")] = None,
    file: Annotated[list[str] | None, typer.Option(
        "--file", help="Restore this state file (state.sqlite3, autoscaling.sqlite3, keys.json; repeatable) even "
                       "if it is sound (default: the files `pier state check` finds wrong, else state.sqlite3).")
    ] = None,
    state_dir: StateDir = None,
) -> None:
    """Put backups in place of state files, after moving each current file aside (stop the gateway first).

    What changed since each backup is lost (it says what); the files moved aside are kept."""
    from pier.control import backups
    from pier.gateway.state_files import FILES
    from pier.state_folder.errors import StateError

    folder = _folder(state_dir)
    try:
        restored = backups.restore(folder, FILES, backup, names=file or ())
    except StateError as error:
        console.print(f"[red]{error.message}[/]")
        raise typer.Exit(1) from None
    for done in restored:
        for moved in done.moved:
            console.print(f"  moved aside: {moved}")
        console.print(f"[green]Restored[/] {done.backup} ({_when(done.backup)}) to {done.state}.")
        if done.unknown:
            console.print(f"  What the backup lacks is not known: {done.unknown}.")
        elif done.lacks:
            console.print(f"  It lacks what the file held: {', '.join(done.lacks)}.")
        else:
            console.print("  It lacks nothing the file held.")
        if done.adds:
            console.print(f"  It brings back: {', '.join(done.adds)} (deleted, revoked or made unreadable since).")
    console.print(f"Start the gateway again: pier up --state-dir {folder}")


@state_app.command("migrate")
def migrate(
    to: Annotated[str, typer.Option("--to", help="The PostgreSQL database to move the state into "
                                                 "(postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE).")],
    state_dir: StateDir = None,
) -> None:
    """Move the state folder's stores (and keys.json) into a PostgreSQL database (one without pier's state yet),
    for gateways started with --state-url from then on (stop the gateway first). The folder's files stay as they
    are.

    Exits 1 when the database refuses, or when a table's rows counted in the database differ from the file's."""
    from pier.control import backups
    from pier.gateway.key_table import KeyTable, folder_rows
    from pier.gateway.state_files import STORES
    from pier.security.keystore import KeyStoreError
    from pier.state_folder import migration
    from pier.state_folder.errors import StateError
    from pier.state_folder.postgres import is_url, shown

    if not is_url(to):
        console.print(f"[red]--to {to!r} is not a PostgreSQL URL: give postgresql://USER@HOST/DATABASE.[/]")
        raise typer.Exit(2)
    folder = _folder(state_dir)
    try:
        with backups.holding(folder):  # no gateway writes the files while they are read
            moved = migration.migrate(folder, to, (*STORES, KeyTable), {KeyTable: folder_rows})  # keys.json too
    except StateError as error:
        console.print(f"[red]{error.message}[/]")
        raise typer.Exit(1) from None
    except KeyStoreError as error:
        console.print(f"[red]{error}[/]")
        raise typer.Exit(1) from None
    for table in moved:
        mark = "[green]ok[/]" if table.ok else f"[red]{table.counted} in the database[/]"
        console.print(f"  {table.schema}.{table.table}: {table.rows} row{'s' if table.rows != 1 else ''} {mark}")
    if not all(table.ok for table in moved):
        console.print("[red]The counts differ: do not start gateways on the database; drop its pier_* schemas and "
                      "migrate again.[/]")
        raise typer.Exit(1)
    console.print(f"[green]Moved[/] {folder} into {shown(to)}. Start the gateways with --state-url "
                  f"(or PIER_STATE_URL); the folder's files are left as they were.")
