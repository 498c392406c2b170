"""A copy's choice of llama.cpp CPU kernels, made once before it loads its model, and said once.

The verdict comes from pier's cache when this host, build and kind of model were proven before, else from a probe
(`pier.engine.kernel_probe`); the copy then loads with the fastest family that worked and logs, once, what it uses
and why ("AMX kernels crash on this host (SIGSEGV); using AVX-512 repack kernels"). The same words reach the
gateway on /ping (`pier.channel.unservable`), so /pier/copies, `pier describe` and the console show them.

A copy where no family works cannot serve: it ends with KernelsUnusable, which the copy reports with an exit code
of its own so its supervisor fails it at once with these words instead of restarting it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pier.channel.headers import CONCURRENCY_HEADER, KERNELS_HEADER
from pier.engine.kernels import KernelFamily, chosen, notice, read_host
from pier.errors import PierError

log = logging.getLogger("pier.server")


class KernelsUnusable(PierError):
    """Every kernel family llama.cpp has on this host crashed, hung or computed wrong on this model."""


@dataclass(frozen=True)
class KernelChoice:
    family: KernelFamily
    notice: str  # what the copy says of it, once
    host: str  # the CPU's flags and the build's features, one line


_current: KernelChoice | None = None  # what this process computes with (a multi-model copy: the slowest chosen)


def current() -> KernelChoice | None:
    return _current


def choose_kernels(gguf: Path, cache_dir: Path, threads: int, embeddings: bool = False) -> KernelChoice | None:
    """Prove (or recall) the kernel families on this model and make this process use the fastest that works (or,
    where an earlier model of this process needed a slower one, keep that: a family once left is not taken back).
    None where llama.cpp cannot read the model at all: its own load then says what is wrong with the file."""
    global _current
    from pier.engine import kernel_probe
    from pier.engine.llama import system_info, use_family

    info = system_info()
    host = read_host(info)
    try:
        kind = kernel_probe.model_kind(gguf)
    except Exception:  # not a GGUF the reader knows, whatever it raises: llama.cpp's load says why
        return None
    key = kernel_probe.verdict_key(host, info, kind)
    folder = cache_dir / "kernels"
    verdict = kernel_probe.cached_verdict(folder, key)
    if verdict is None:
        log.info("proving llama.cpp's CPU kernels on this kind of model (%s)", ", ".join(host.families()))
        verdict = kernel_probe.prove(gguf, host, threads, embeddings)
        if all(t.refused for t in verdict.trials):  # the model, not the kernels: llama.cpp's load says why
            return None
        kernel_probe.keep_verdict(folder, key, verdict)
        log.info("kernels proven in %.1f s", verdict.seconds)
    said = notice(host, verdict.trials)
    family = chosen(verdict.trials)
    if family is None:
        raise KernelsUnusable(f"{said}. pier tried {', '.join(host.name(t.family) for t in verdict.trials)} in a "
                              "child process each; none ran this model. Check the GGUF (does it load elsewhere?), "
                              "or rebuild llama-cpp-python for this CPU (docs/benchmarks.md, \"AMX hosts\").")
    order = list(KernelFamily)
    if _current is not None and order.index(_current.family) >= order.index(family):
        return _current
    use_family(family, host)
    log.info("kernels: %s", said)
    _current = KernelChoice(family, said, host.summary())
    return _current


def ready_headers(concurrency: int) -> dict[str, str]:
    """What a ready copy's /ping says of itself: its concurrency, and its kernels once chosen."""
    headers = {CONCURRENCY_HEADER: str(concurrency)}
    if _current is not None:
        headers[KERNELS_HEADER] = _current.notice
    return headers
