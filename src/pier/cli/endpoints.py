"""`pier deploy / ls / describe / invoke / chat / logs / delete`: endpoints on a running gateway."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.markup import escape
from rich.table import Table

from pier.cli.app import app, console

if TYPE_CHECKING:
    from pier.client.pier_client import PierClient

Url = Annotated[str, typer.Option(envvar="PIER_URL", help=(
    "The gateway (default http://127.0.0.1:8080; https://HOST:PORT for one started with --tls-cert)."))]
CaBundle = Annotated[Path | None, typer.Option(help=(
    "PEM file of the CA(s) an https:// gateway's certificate is checked against (default: AWS_CA_BUNDLE, "
    "REQUESTS_CA_BUNDLE or SSL_CERT_FILE, else the public CAs)."))]
Json = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
DEFAULT_URL = "http://127.0.0.1:8080"


def _client(url: str, ca_bundle: Path | None) -> PierClient:
    from pier.client.pier_client import PierClient, PierClientError, url_problem

    if (problem := url_problem(url)) is not None:  # a usage mistake: 2, as for any bad option
        _fail(f"--url {url} {problem}", 2)
    try:
        client = PierClient(url, ca_bundle_file=ca_bundle, credentials=_database_credentials(url))
        client.ping()
    except PierClientError as error:
        _fail(str(error))
    return client


def _database_credentials(url: str) -> tuple[str, str] | None:
    """With PIER_STATE_URL, an admin key of the state database's for a gateway on this machine (the gateway's keys
    are the database's, not the folder's keys.json); None: the default (security.client_credentials)."""
    import os

    from pier.gateway.key_table import keys_in
    from pier.security.client_credentials import cli_credentials, state_dir
    from pier.state_folder.errors import StateError

    state_url = os.environ.get("PIER_STATE_URL")
    if not state_url:
        return None
    try:
        with keys_in(state_url, state_dir()) as keys:
            return cli_credentials(url, keys=keys)
    except StateError as error:  # the call is refused if the gateway wants a key; say why none was found
        console.print(f"[yellow]warning:[/] no admin key read from PIER_STATE_URL: {escape(error.message)}")
        return None


def _fail(message: str, code: int = 1) -> NoReturn:
    console.print(f"[red]error:[/] {escape(message)}")  # messages quote patterns and names with [brackets]
    raise typer.Exit(code)


def _say(line: str) -> None:
    console.print(f"  {escape(line)}")  # progress lines quote failure reasons, which may hold [brackets]


@contextmanager
def _answered() -> Iterator[None]:
    """Whatever the gateway refused, as one line and exit 1: botocore's and httpx's errors would otherwise end
    the command in a traceback."""
    import httpx
    from botocore.exceptions import BotoCoreError, ClientError

    from pier.client.pier_client import PierClientError, refusal

    try:
        yield
    except PierClientError as error:
        _fail(str(error))
    except ClientError as error:
        _fail(refusal(error))
    except (BotoCoreError, httpx.HTTPError) as error:  # ParamValidationError, a connection lost midway
        _fail(f"{type(error).__name__}: {error}")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


@app.command("deploy")
def deploy(
    file: Annotated[Path, typer.Argument(help="A deploy file (YAML): endpoint, instance type, model or components.")],
    url: Url = DEFAULT_URL,
    ca_bundle: CaBundle = None,
    wait: Annotated[bool, typer.Option(help="Wait until the endpoint is InService.")] = True,
) -> None:
    """Create or update an endpoint from a deploy file (YAML, see the README); only what changed moves."""
    from pier.client.deploy_file import DeployFileError, load

    try:
        spec = load(file)
    except DeployFileError as error:
        _fail(str(error), 2)
    client = _client(url, ca_bundle)
    try:
        with _answered():
            client.deploy(spec, file.resolve().parent, wait=wait, say=_say)
    except KeyboardInterrupt:  # the gateway goes on with what it was sent: say how to look at it or undo it
        _fail(f"Stopped waiting (Ctrl-C); the gateway goes on with what was sent: `pier describe {spec.endpoint}` "
              f"says where it stands, `pier delete {spec.endpoint}` removes it.", 130)
    if wait:
        console.print(f"[green]{spec.endpoint}[/] deployed.")
    else:
        console.print(f"{spec.endpoint}: sent; `pier describe {spec.endpoint}` says when it is InService.")


@app.command("ls")
def ls(url: Url = DEFAULT_URL, ca_bundle: CaBundle = None, as_json: Json = False) -> None:
    """List endpoints with their status, instances and ready copies."""
    client = _client(url, ca_bundle)
    with _answered():
        rows = client.endpoints()
    if as_json:
        _print_json([row.__dict__ for row in rows])
        return
    table = Table("endpoint", "status", "instance type", "instances", "serves", "copies ready", "reason")
    for row in rows:
        status = {"InService": "green", "Failed": "red"}.get(row.status, "yellow")
        table.add_row(row.name, f"[{status}]{row.status}[/]", row.instance_type, str(row.instances), row.serves,
                      f"{row.copies_ready}/{row.copies_wanted}", escape(reason_line(row.failure_reason)))
    console.print(table if rows else "No endpoints yet: `pier deploy FILE.yaml` or `pier serve MODEL` makes one.")


def reason_line(reason: str) -> str:
    """A failure reason's first line: a copy's failure carries its last log lines after it."""
    first, _, rest = reason.partition("\n")
    return f"{first} (`pier describe` has the rest)" if rest.strip() else first


@app.command("describe")
def describe(name: str, url: Url = DEFAULT_URL, ca_bundle: CaBundle = None, as_json: Json = False) -> None:
    """An endpoint (or inference component), its components and its copies."""
    client = _client(url, ca_bundle)
    with _answered():
        described = client.describe(name)
    if as_json:
        _print_json(described)
        return
    main = {k: v for k, v in (described.get("endpoint") or described.get("component") or {}).items()
            if k != "ResponseMetadata"}
    console.print_json(json.dumps(main, default=str))
    for component in described.get("components", []):
        console.print(f"[bold]component[/] {component['InferenceComponentName']}: "
                      f"{component.get('InferenceComponentStatus')}")
    table = Table("copy", "serves", "state", "device", "kernels", "url", "restarts", "message")
    for copy in described.get("copies", []):
        table.add_row(copy["copy_id"], copy["component"], copy["state"], _device(copy), copy.get("kernels") or "",
                      copy.get("url") or "", str(copy.get("restarts", 0)), copy.get("message") or "")
    console.print(table)


def _device(copy: dict[str, Any]) -> str:
    """`GPU 0,1`, `CPU`, or `CPU (asked for 1 GPU: --cpu-fallback)` from a /pier/copies row."""
    if copy.get("gpus"):
        return "GPU " + ",".join(copy["gpus"])
    if copy.get("cpu_fallback"):
        return f"CPU (asked for {copy.get('accelerators')} GPU: --cpu-fallback)"
    return str(copy.get("device") or "").upper()


@app.command("invoke")
def invoke(
    name: Annotated[str, typer.Argument(help="The endpoint.")],
    prompt: Annotated[str | None, typer.Option(help="Send a TGI payload with this text.")] = None,
    body: Annotated[str | None, typer.Option(help="The raw JSON body; @FILE reads a file, - reads stdin.")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="With --prompt: tokens to generate.")] = 64,
    component: Annotated[str | None, typer.Option(help="The inference component to call.")] = None,
    stream: Annotated[bool, typer.Option(help="Use InvokeEndpointWithResponseStream.")] = False,
    content_type: Annotated[str, typer.Option(help="Content-Type of the body.")] = "application/json",
    url: Url = DEFAULT_URL,
    ca_bundle: CaBundle = None,
) -> None:
    """Call an endpoint through the SageMaker runtime API, as boto3 does; the reply goes to stdout."""
    payload = _payload(prompt, body, max_new_tokens, stream)
    client = _client(url, ca_bundle)
    with _answered():
        if stream:
            for part in client.invoke_stream(name, payload, content_type=content_type, component=component):
                sys.stdout.write(part.decode("utf-8", "replace"))
                sys.stdout.flush()
        else:
            sys.stdout.write(client.invoke(name, payload, content_type=content_type, component=component)
                             .decode("utf-8", "replace") + "\n")


def _payload(prompt: str | None, body: str | None, max_new_tokens: int, stream: bool) -> str:
    if (prompt is None) == (body is None):
        _fail("give --prompt TEXT or --body JSON (one of them)", 2)
    if prompt is not None:  # TGI's payload; the container streams only when the body asks for it
        return json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": max_new_tokens}, "stream": stream})
    assert body is not None
    if body == "-":
        return sys.stdin.read()
    if not body.startswith("@"):
        return body
    try:
        return Path(body[1:]).read_text()
    except (OSError, UnicodeDecodeError) as error:
        _fail(f"Cannot read {body[1:]}: {getattr(error, 'strerror', None) or error}.", 2)


@app.command("chat")
def chat(
    name: Annotated[str, typer.Argument(help="The endpoint or inference component to talk to.")],
    system: Annotated[str | None, typer.Option(help="A system prompt.")] = None,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per reply.")] = 256,
    url: Url = DEFAULT_URL,
    ca_bundle: CaBundle = None,
) -> None:
    """Talk to an endpoint in the terminal; replies stream as they are generated. Ctrl-D or `exit` ends it."""
    client = _client(url, ca_bundle)
    with _answered():  # a misspelt name is said before the first prompt, not after it
        client.check_named(name)
    messages = [{"role": "system", "content": system}] if system else []
    console.print(f"Chatting with [bold]{name}[/]. Ctrl-D or `exit` to leave.")
    while True:
        try:
            text = console.input("[bold cyan]you>[/] ")
        except EOFError:
            break
        if text.strip() in {"exit", "quit"}:
            break
        messages.append({"role": "user", "content": text})
        reply = []
        console.print(f"[bold magenta]{name}>[/] ", end="")
        with _answered():
            for piece in client.chat(name, messages, max_tokens=max_tokens):
                reply.append(piece)
                console.print(piece, end="", markup=False, highlight=False)
        console.print()
        messages.append({"role": "assistant", "content": "".join(reply)})


@app.command("logs")
def logs(
    name: str,
    lines: Annotated[int, typer.Option(min=1, help="Lines from the end of each copy's log.")] = 200,
    url: Url = DEFAULT_URL,
    ca_bundle: CaBundle = None,
) -> None:
    """The end of the log of each copy serving an endpoint or inference component."""
    client = _client(url, ca_bundle)
    with _answered():
        found = client.logs(name, lines)
    if not found:
        console.print(escape(f"No copies serve {name} right now{_why_no_copies(client, name)}."))
    for copy_id, text in found.items():
        console.rule(copy_id)
        sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")


def _why_no_copies(client: PierClient, name: str) -> str:
    """`: it is Creating (Converting ... to GGUF: reading shard 3 of 6)`: what the endpoint or component waits on
    before it has copies (a model being fetched or converted), or why it failed; "" when it says nothing."""
    described = client.describe(name)
    record = described.get("endpoint") or described.get("component") or {}
    status = record.get("EndpointStatus") or record.get("InferenceComponentStatus") or ""
    reason = record.get("FailureReason") or ""
    if not status or status == "InService":
        return ""
    return f": it is {status}" + (f" ({reason_line(reason)})" if reason else "")


@app.command("delete")
def delete(
    name: str,
    url: Url = DEFAULT_URL,
    ca_bundle: CaBundle = None,
    wait: Annotated[bool, typer.Option(help="Wait until it is gone.")] = True,
) -> None:
    """Delete an endpoint with its inference components, its config and the models nothing else uses."""
    client = _client(url, ca_bundle)
    with _answered():
        client.delete(name, wait=wait, say=_say)
    console.print(f"[green]{name}[/] deleted.")


