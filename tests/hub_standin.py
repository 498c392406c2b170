"""A local stand-in for the Hugging Face Hub (no internet here): the routes `huggingface_hub` calls to describe a
model repo and download its files, served from folders on loopback. A process reaches it through HF_ENDPOINT;
a gated repo answers downloads without a token as the Hub does (401, X-Error-Code: GatedRepo)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


class Repo:
    def __init__(self, folder: Path, *, gated: bool = False) -> None:
        self.folder = folder
        self.gated = gated
        self.files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        listing = json.dumps([(f, (folder / f).stat().st_size) for f in self.files])
        self.commit = hashlib.sha1(listing.encode()).hexdigest()

    def info(self, repo_id: str) -> dict[str, object]:
        return {"id": repo_id, "modelId": repo_id, "sha": self.commit, "private": False,
                "gated": "auto" if self.gated else False,
                "siblings": [{"rfilename": f, "size": (self.folder / f).stat().st_size,
                              "blobId": hashlib.sha1(f.encode()).hexdigest()} for f in self.files]}


class Hub:
    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.downloads: list[str] = []
        self.url = ""

    def add(self, repo_id: str, folder: Path, *, gated: bool = False) -> Repo:
        self.repos[repo_id] = Repo(folder, gated=gated)
        return self.repos[repo_id]


@contextmanager
def hub_standin() -> Iterator[Hub]:
    hub = Hub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            self._answer(body=True)

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def _answer(self, *, body: bool) -> None:
            parts = unquote(urlparse(self.path).path).strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                repo = hub.repos.get("/".join(parts[2:4]))
                if repo is None:
                    return self._error(404, "RepoNotFound", "Repository not found")
                return self._send(200, json.dumps(repo.info("/".join(parts[2:4]))).encode(), body,
                                  {"Content-Type": "application/json"})
            if len(parts) >= 5 and parts[2] == "resolve":
                repo = hub.repos.get("/".join(parts[:2]))
                name = "/".join(parts[4:])
                if repo is None or name not in repo.files:
                    return self._error(404, "EntryNotFound", "Entry not found")
                if repo.gated and "authorization" not in {k.lower() for k in self.headers}:
                    return self._error(401, "GatedRepo", "Access to this model is restricted: you must be "
                                       "authenticated and have been granted access.")
                data = (repo.folder / name).read_bytes()
                if body:
                    hub.downloads.append(name)
                return self._send(200, data, body, {"X-Repo-Commit": repo.commit,
                                                    "ETag": f'"{hashlib.sha1(data).hexdigest()}"'})
            return self._error(404, "", "Not found")

        def _error(self, status: int, code: str, message: str) -> None:
            headers = {"X-Error-Message": message, "Content-Type": "application/json"}
            if code:
                headers["X-Error-Code"] = code
            self._send(status, json.dumps({"error": message}).encode(), self.command != "HEAD", headers)

        def _send(self, status: int, data: bytes, body: bool, headers: dict[str, str]) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if body:
                self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
