"""`pier transforms [NAME]`: transform jobs and their progress (records written, rate, copies), from the
gateway's /pier/transform-jobs, which says what DescribeTransformJob cannot."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from pier.cli.app import app, console
from pier.cli.endpoints import DEFAULT_URL, CaBundle, Json, Url, _client, _fail, _print_json


@app.command("transforms")
def transforms(name: Annotated[str | None, typer.Argument(help="One job (default: every job).")] = None,
               url: Url = DEFAULT_URL, ca_bundle: CaBundle = None, as_json: Json = False) -> None:
    """Transform jobs (CreateTransformJob) with their progress: objects, records, rate, copies."""
    client = _client(url, ca_bundle)
    reply = client.http.get(f"/pier/transform-jobs/{name}" if name else "/pier/transform-jobs")
    if reply.status_code == 404:
        _fail(reply.json().get("message", f"no transform job {name}"))
    reply.raise_for_status()
    jobs: list[dict[str, Any]] = [reply.json()] if name else reply.json()["jobs"]
    if as_json:
        _print_json(jobs[0] if name else jobs)
        return
    table = Table("job", "status", "objects", "units", "records written", "units/s", "copies", "in flight", "reason")
    for job in jobs:
        status = {"Completed": "green", "Failed": "red"}.get(job["status"], "yellow")
        table.add_row(job["name"], f"[{status}]{job['status']}[/]", f"{job['objectsDone']}/{job['objects']}",
                      f"{job['unitsDone']}/{job['units']}", f"{job['recordsWritten']}/{job['records']}",
                      str(job["unitsPerSecond"] or ""), str(job["readyCopies"]), str(job["inFlight"]),
                      job.get("failureReason", ""))
    console.print(table if jobs else "No transform jobs yet: boto3's create_transform_job makes one.")


