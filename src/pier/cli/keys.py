"""`pier keys create / ls / revoke`: who may call the gateway. They edit `<state_dir>/keys.json` directly, so they
work with the gateway stopped, and a running gateway picks the change up on its next request."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.table import Table

from pier.cli.app import app, console

if TYPE_CHECKING:
    from pier.security.keystore import IssuedKey, KeyStore

keys_app = typer.Typer(help="Keys for the gateway: who may call it, with which role.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

StateDir = Annotated[Path | None, typer.Option(envvar="PIER_STATE_DIR",
                                                help="The gateway's state folder (default ~/.pier).")]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


def _store(state_dir: Path | None) -> KeyStore:
    from pier.security.keystore import KeyStore

    return KeyStore.in_state_dir((state_dir or Path.home() / ".pier").expanduser())


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
    state_dir: StateDir = None,
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
    try:
        issued = _store(state_dir).create(name, Role(role), endpoint or ())
    except KeyStoreError as error:
        _fail(str(error))
    _show(issued, as_json)


def _show(issued: IssuedKey, as_json: bool) -> None:
    stored = issued.stored
    if as_json:
        sys.stdout.write(json.dumps({
            "name": stored.principal.name, "role": stored.principal.role.value,
            "endpoints": list(stored.principal.endpoints), "access_key_id": stored.access_key_id,
            "secret_access_key": stored.secret_access_key, "api_key": issued.api_key}) + "\n")
        return
    # The one time the secrets are shown: on stdout, so they can be piped away from the terminal's log.
    console.print(f"Created key [bold]{stored.principal.name}[/] ({stored.principal.describe()}). The secrets below "
                  "are shown once; store them now.")
    print(f"AWS access key id:     {stored.access_key_id}")
    print(f"AWS secret access key: {stored.secret_access_key}")
    print(f"API key (Bearer):      {issued.api_key}")
    console.print(
        "\nboto3 / sagemaker SDK: aws_access_key_id and aws_secret_access_key as above (or AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY), endpoint_url the gateway.\nopenai: OpenAI(base_url=\"http://HOST:8080/v1\", "
        "api_key=\"<API key>\").\npier CLI: PIER_ACCESS_KEY_ID / PIER_SECRET_ACCESS_KEY (on this machine it "
        "uses an admin key from the key file by itself).")


@keys_app.command("ls")
def ls(state_dir: StateDir = None, as_json: Json = False) -> None:
    """The keys: name, role, endpoints, access key id, created. Never a secret."""
    from pier.security.keystore import KeyStoreError

    try:
        keys = _store(state_dir).saved()
    except KeyStoreError as error:
        _fail(str(error))
    rows = [{"name": k.principal.name, "role": k.principal.role.value, "endpoints": list(k.principal.endpoints),
             "access_key_id": k.access_key_id,
             "created": datetime.fromtimestamp(k.created, UTC).strftime("%Y-%m-%d %H:%M:%SZ")} for k in keys]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        console.print("No keys: the gateway needs none on 127.0.0.1. `pier keys create NAME --role admin` makes one "
                      "(and turns authentication on).")
        return
    table = Table("name", "role", "endpoints", "access key id", "created")
    for row in rows:
        table.add_row(str(row["name"]), str(row["role"]), ", ".join(row["endpoints"]) or "all",
                      str(row["access_key_id"]), str(row["created"]))
    console.print(table)


@keys_app.command("revoke")
def revoke(name: str, state_dir: StateDir = None) -> None:
    """Delete a key: requests signed with it fail from the next one on (no restart)."""
    from pier.security.keystore import KeyStoreError

    try:
        removed = _store(state_dir).revoke(name)
    except KeyStoreError as error:
        _fail(str(error))
    console.print(f"Revoked {removed.principal.describe()} (access key id {removed.access_key_id}).")
