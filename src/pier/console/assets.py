"""Serving the console's built files: the page (never cached, so a new pier shows its new console) and its
content-hashed assets (cached for a year: their names change when they do), each with a strict CSP.

The page only talks to its own origin; it holds no data, which is why pier.security lets anyone load it (the
API calls it makes carry the user's key and are checked like any other)."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, PlainTextResponse, Response

STATIC = Path(__file__).parent / "static"
PAGE = "index.html"
# Scripts and styles from the console's own files only; CSSOM styles (uPlot's, Preact's) are not attributes, so
# 'unsafe-inline' is not needed. Blob and data images: charts exported by the browser, the favicon.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SAFE = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY"}
PAGE_CACHE = "no-cache"
ASSET_CACHE = "public, max-age=31536000, immutable"
NOT_BUILT = ("The console's files are missing from this installation: build them with console/build.sh in pier's "
             "source tree (it needs Node 20), or install a pier release, which ships them.")


def console_router(static: Path = STATIC) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    async def page() -> Response:
        return _file(static, static / PAGE, PAGE_CACHE)

    async def asset(name: str) -> Response:
        return _file(static, _asset_path(static, name), ASSET_CACHE)

    router.add_api_route("/console", page, methods=["GET", "HEAD"], response_model=None)
    router.add_api_route("/console/", page, methods=["GET", "HEAD"], response_model=None)
    router.add_api_route("/console/assets/{name}", asset, methods=["GET", "HEAD"], response_model=None)
    return router


def _asset_path(static: Path, name: str) -> Path | None:
    """Only a file the build wrote, by its plain name: nothing outside the assets folder is ever served."""
    folder = static / "assets"
    if "/" in name or "\\" in name or name.startswith("."):
        return None
    path = folder / name
    return path if path.is_file() else None


def _file(static: Path, path: Path | None, cache: str) -> Response:
    if path is None or not path.is_file():
        missing = not (static / PAGE).is_file()
        message = NOT_BUILT if missing else "No such console file; open /console to load the console."
        return PlainTextResponse(message, 404, headers=SAFE)
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=media_type, headers={**SAFE, "Cache-Control": cache})
