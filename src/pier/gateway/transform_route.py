"""`GET /pier/transform-jobs[/NAME]`: the progress of transform jobs that DescribeTransformJob cannot carry
(units and records done, rate, copies ready, records in flight), for the `pier transforms` command."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from pier.error_bodies import pier_answer
from pier.gateway.parts import gateway_of


async def transform_jobs(request: Request) -> JSONResponse:
    transforms = gateway_of(request).transforms
    names = transforms.names() if transforms else []
    return JSONResponse({"jobs": [transforms.progress(name) for name in names] if transforms else []})


async def transform_job(request: Request, name: str) -> Response:
    transforms = gateway_of(request).transforms
    found = transforms.progress(name) if transforms else None
    if found is None:
        return pier_answer(404, f"There is no transform job {name}: pier transforms lists them.").response()
    return JSONResponse(found)
