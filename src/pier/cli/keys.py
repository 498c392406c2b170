"""`pier keys create / rotate / ls / revoke`: who may call the gateway. They edit `<state_dir>/keys.json` directly
(or, with `--state-url`, the keys in the gateways' state database), so they work with the gateway stopped, and a
running gateway picks the change up on its next request (within a second, from a database)."""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.table import Table

from pier.cli.app import app, console, listing

if TYPE_CHECKING:
    from pier.security.keystore import IssuedKey, KeyStore

keys_app = typer.Typer(help="Keys for the gateway: who may call it, with which role.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

StateDir = Annotated[Path | None, typer.Option(envvar="PIER_STATE_DIR",
                                                help="The gateway's state folder (default ~/.pier).")]
StateUrl = Annotated[str | None, typer.Option(envvar="PIER_STATE_URL", help=(
    "The gateways' state database (postgresql://…), whose keys every gateway on it uses, instead of the folder's "
    "keys.json."))]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
Expires = Annotated[str | None, typer.Option(help=(
    "When the key stops working: a duration (90d, 12h, 30m, 2w) or a UTC date and time (2026-01-31, "
    "2026-01-31T18:00:00Z). Default: never."))]


def _store(state_dir: Path | None, state_url: str | None = None) -> KeyStore:
    from pier.security.keystore import KeyStore

    folder = (state_dir or Path.home() / ".pier").expanduser()
    if not state_url:
        return KeyStore.in_state_dir(folder)
    from pier.gateway.key_table import DatabaseKeys, KeyTable
    from pier.state_folder.errors import StateError
    from pier.state_folder.postgres import Postgres, is_url

    if not is_url(state_url):
        _fail(f"--state-url {state_url!r} is not a PostgreSQL URL: give postgresql://USER@HOST/DATABASE.", 2)
    try:
        return DatabaseKeys(KeyTable.open(folder, Postgres(state_url)))
    except StateError as error:  # the database cannot be reached, or is a newer pier's
        _fail(error.message)


def _fail(message: str, code: int = 1) -> NoReturn:
    console.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Who the key is for (letters, digits, - _ . @).")],
    role: Annotated[str, typer.Option(help="admin: everything, including creating models (which can run code); "
                                           "invoke: the runtime and OpenAI routes only.")] = "invoke",
    endpoint: Annotated[list[str] | None, typer.Option(
        help="With --role invoke: the only endpoint it may call (repeat for more). Default: every endpoint.")] = None,
    expires: Expires = None,
    state_dir: StateDir = None,
    state_url: StateUrl = None,
    as_json: Json = False,
) -> None:
    """Create a key: an AWS-style access key pair (boto3, the sagemaker SDK) and an API key (Bearer, the openai
    client). The secrets are shown once."""
    from pier.security.keystore import KeyStoreError
    from pier.security.principal import Role

    if role not in {r.value for r in Role}:
        _fail(f"--role must be admin or invoke, not {role!r}", 2)
    if endpoint and role == Role.ADMIN:
        _fail("--endpoint limits an invoke key; an admin key may do everything anyway", 2)
    until = _expiry(expires)
    try:
        issued = _store(state_dir, state_url).create(name, Role(role), endpoint or (), until)
    except KeyStoreError as error:
        _fail(str(error))
    _show(issued, as_json)


@keys_app.command("rotate")
def rotate(
    name: Annotated[str, typer.Argument(help="The key to give new secrets.")],
    expires: Expires = None,
    state_dir: StateDir = None,
    state_url: StateUrl = None,
    as_json: Json = False,
) -> None:
    """New secrets for a key, with its role and endpoints. Its current secrets keep working until you revoke them
    (`pier keys revoke NAME --access-key-id OLD_ID`), so clients can move over first."""
    from pier.security.keystore import KeyStoreError

    until = _expiry(expires)
    try:
        issued = _store(state_dir, state_url).rotate(name, until)
    except KeyStoreError as error:
        _fail(str(error))
    _show(issued, as_json)
    if not as_json:
        console.print(f"The old secrets of {name} still work: move clients to these, then `pier keys revoke {name} "
                      "--access-key-id OLD_ID` (`pier keys ls` lists both ids).")


def _expiry(expires: str | None) -> float | None:
    from pier.security.expiry import expiry_time

    if expires is None:
        return None
    try:
        return expiry_time(expires, time.time())
    except ValueError as error:
        _fail(str(error), 2)


def _show(issued: IssuedKey, as_json: bool) -> None:
    stored = issued.stored
    if as_json:
        sys.stdout.write(json.dumps({
            "name": stored.principal.name, "role": stored.principal.role.value,
            "endpoints": list(stored.principal.endpoints), "access_key_id": stored.access_key_id,
            "secret_access_key": stored.secret_access_key, "api_key": issued.api_key,
            "expires": stored.expires}) + "\n")
        return
    # The one time the secrets are shown: on stdout, so they can be piped away from the terminal's log.
    console.print(f"Created key [bold]{stored.principal.name}[/] ({stored.principal.describe()}). The secrets below "
                  "are shown once; store them now.")
    print(f"AWS access key id:     {stored.access_key_id}")
    print(f"AWS secret access key: {stored.secret_access_key}")
    print(f"API key (Bearer):      {issued.api_key}")
    if stored.expires is not None:
        from pier.security.expiry import shown

        console.print(f"It expires at {shown(stored.expires)}.")
    console.print(
        "\nboto3 / sagemaker SDK: aws_access_key_id and aws_secret_access_key as above (or AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY), endpoint_url the gateway.\nopenai: OpenAI(base_url=\"http://HOST:8080/v1\", "
        "api_key=\"<API key>\").\npier CLI: PIER_ACCESS_KEY_ID / PIER_SECRET_ACCESS_KEY (on this machine it "
        "uses an admin key from the key file by itself).")


@keys_app.command("ls")
def ls(state_dir: StateDir = None, state_url: StateUrl = None, as_json: Json = False) -> None:
    """The keys: name, role, endpoints, access key id, created, expires. Never a secret."""
    from pier.security.expiry import shown
    from pier.security.keystore import KeyStoreError

    try:
        keys = _store(state_dir, state_url).saved()
    except KeyStoreError as error:
        _fail(str(error))
    rows: list[dict[str, Any]] = [
        {"name": k.principal.name, "role": k.principal.role.value, "endpoints": list(k.principal.endpoints),
             "access_key_id": k.access_key_id,
             "created": datetime.fromtimestamp(k.created, UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
             "expires": shown(k.expires), "expired": k.expired(time.time())} for k in keys]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        console.print("No keys: the gateway needs none on 127.0.0.1. `pier keys create NAME --role admin` makes one "
                      "(and turns authentication on).")
        return
    table = Table("name", "role", "endpoints", "access key id", "created", "expires")
    for row in rows:
        until = f"{row['expires']} (EXPIRED)" if row["expired"] else str(row["expires"])
        table.add_row(str(row["name"]), str(row["role"]), ", ".join(row["endpoints"]) or "all",
                      str(row["access_key_id"]), str(row["created"]), until)
    listing.print(table)


@keys_app.command("revoke")
def revoke(
    name: str,
    access_key_id: Annotated[str | None, typer.Option(help=(
        "Revoke only these secrets of the key (the old ones, after `pier keys rotate`). Default: all of them."))
    ] = None,
    state_dir: StateDir = None,
    state_url: StateUrl = None,
) -> None:
    """Delete a key: requests signed with it fail from the next one on (no restart). Revoking the last valid key
    of a gateway that listens beyond loopback makes it refuse every call until a key is created."""
    from pier.gateway import listening
    from pier.security.keystore import KeyStoreError

    store = _store(state_dir, state_url)
    try:
        removed = store.revoke(name, access_key_id)
        now = time.time()
        valid, left = len(store.usable(now)), len(store.saved())
    except KeyStoreError as error:
        _fail(str(error))
    for key in removed:
        console.print(f"Revoked {key.principal.describe()} (access key id {key.access_key_id}).")
    warning = listening.revoke_warning(valid, left - valid, listening.running(store.path.parent))
    if warning is not None:
        console.print(f"[yellow]warning:[/] {warning}")
