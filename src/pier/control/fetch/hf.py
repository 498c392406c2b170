"""Model files on the Hugging Face Hub: `hf://org/repo[@revision][/path/file.gguf]`.

pier serves GGUF files, so a repo without a named file contributes its one GGUF model (all shards of it)
plus any `code/` folder (a bring-your-own inference.py); safetensors and the rest stay on the Hub. A repo with no
GGUF is taken as a checkpoint in Hugging Face layout: its config, safetensors and tokenizer files are fetched (never
its pickles or code) and converted after (pier.control.fetch.conversion).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pier.control.fetch import checkpoint

_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


class Hub(Protocol):
    """The two calls pier makes; `huggingface_hub.HfApi` has both. `token` is passed only when the model's own
    environment names one (HF_TOKEN, as TGI reads it); else the gateway's own (its HF_TOKEN or login) is used."""

    def model_info(self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False,
                   token: str | None = None) -> Any: ...

    def hf_hub_download(self, repo_id: str, filename: str, *, revision: str | None = None,
                        local_dir: str | Path | None = None, token: str | None = None) -> str: ...


@dataclass(frozen=True)
class HfRef:
    repo: str
    revision: str | None = None
    filename: str | None = None


def parse(url: str) -> HfRef:
    rest = url.removeprefix("hf://").strip("/")
    parts = rest.split("/")
    if len(parts) < 2 or not all(parts[:2]):
        raise ValueError(f"{url!r} is not hf://org/repo[/file.gguf]: name the repo as org/name.")
    name, _, revision = parts[1].partition("@")
    filename = "/".join(parts[2:]) or None
    return HfRef(f"{parts[0]}/{name}", revision or None, filename)


def choose(ref: HfRef, info: Any) -> tuple[str, list[tuple[str, int]]]:
    """The commit to fetch and the files (name, size) to fetch from it."""
    files = {s.rfilename: int(s.size or 0) for s in info.siblings or []}
    wanted = [ref.filename] if ref.filename else _default_files(ref, files)
    missing = [f for f in wanted if f not in files]
    if missing:
        ggufs = ", ".join(sorted(f for f in files if f.endswith(".gguf"))) or "none"
        raise FileNotFoundError(f"{ref.repo} has no file {missing[0]!r}; its GGUF files: {ggufs}.")
    wanted += [f for f in files if f.startswith("code/") and f not in wanted]
    return str(info.sha), [(f, files[f]) for f in wanted]


def _default_files(ref: HfRef, files: dict[str, int]) -> list[str]:
    models = sorted(f for f in files if f.endswith(".gguf") and not f.split("/")[-1].startswith("mmproj"))
    firsts = [f for f in models if (m := _SHARD.search(f)) is None or m.group(1) == "00001"]
    if not firsts:
        return _checkpoint_files(ref, files)
    if len(firsts) > 1:
        raise FileNotFoundError(
            f"{ref.repo} holds {len(firsts)} GGUF models ({', '.join(firsts)}): name one, e.g. "
            f"hf://{ref.repo}/{firsts[0]}."
        )
    stem = _SHARD.sub("", firsts[0])
    return [f for f in models if f == firsts[0] or _SHARD.sub("", f) == stem]


def _checkpoint_files(ref: HfRef, files: dict[str, int]) -> list[str]:
    """A repo without GGUF files: its Hugging Face checkpoint, refused at once when it cannot be converted."""
    problem = checkpoint.problem(files, ref.repo)
    if problem:
        raise FileNotFoundError(f"{problem} (pier serves a GGUF repo as it is, and converts a safetensors one)")
    return checkpoint.wanted(files)


def explain(error: Exception, url: str) -> str:
    """A FailureReason for the Hub's refusals that a user can fix ("" for any other error)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    if isinstance(error, GatedRepoError):
        return (f"{url} is a gated repo and the gateway has no token with access to it: accept the model's terms on "
                "its Hub page, then set HF_TOKEN to a read token of that account in the model's Environment (or in "
                "the environment of pier up).")
    if isinstance(error, RevisionNotFoundError):
        return f"{url} has no such revision: name a branch, tag or commit of the repo after @."
    if isinstance(error, RepositoryNotFoundError):
        return (f"{url}: no such repo on the Hub, or a private one: check HF_MODEL_ID's spelling, or set HF_TOKEN "
                "in the model's Environment to a token that can read it.")
    return ""


def default_hub() -> Hub:
    from huggingface_hub import HfApi

    return HfApi()
