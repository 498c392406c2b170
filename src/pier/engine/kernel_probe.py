"""Proving llama.cpp's CPU kernels on this host before a copy serves with them.

A copy about to load a GGUF on the CPU runs one forward pass with each kernel family it may use
(`pier.engine.kernels`) in a child process, so a family that crashes takes the child down, not the copy: first
the plain family (the reference), then the fastest extra family (AMX where the build and the CPU have it, else
repack) on the same tokens. A family that dies, hangs, or whose logits stray from the reference's is out; on an
AMX host whose AMX family is out, a second child refuses AMX (`pier.engine.amx_permission`) and proves the repack
family. The copy then uses the fastest family that worked.

A verdict holds for one host, one build of llama.cpp and one kind of model (architecture and weight types), so
it is kept in pier's cache and a restart, or another copy of the same kind of model, proves nothing again.
Measured on 2 cores (docs/benchmarks.md, "AMX hosts"): a probe costs about a second for a small model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pier.engine.kernels import HostKernels, KernelFamily, Probed

log = logging.getLogger(__name__)

PROMPT_TOKENS = 24  # enough rows that the matrix kernels (AMX's tiles, repacked GEMM) run, not only vector ones
# How far a family's logits may stray from the plain family's, as ||a - b|| / ||b||: each family quantizes
# activations and adds in its own order, so they never agree exactly. Measured (docs/benchmarks.md, "AMX hosts"):
# repack against plain on Gemma 3 270M Q4_K_M, 0.07-0.13 (same top token); the logits of another context, 0.35;
# a broken kernel's garbage, ~1 or NaN. The probe catches broken kernels, not rounding.
TOLERANCE = 0.5
PROBE_TIMEOUT_S = 300.0
VERDICT_VERSION = 1
REFUSED = "fail to load or run the model"  # the child ended with an error of its own, not a crash
# Drills: "repack:crash,plain:wrong" makes the probe's child crash (a real SIGSEGV), hang, or give garbage logits
# for those families, so what a copy does on a host whose kernels fail can be shown on any host (tests, rehearsals).
FAULTS = "PIER_KERNEL_PROBE_FAULTS"
FAULT_KINDS = ("crash", "hang", "wrong")


@dataclass(frozen=True)
class Verdict:
    trials: tuple[Probed, ...]
    seconds: float = 0.0  # what proving took (0 when read from the cache)

    def to_json(self) -> str:
        return json.dumps({"version": VERDICT_VERSION,
                           "trials": [{"family": t.family.value, "problem": t.problem, "refused": t.refused}
                                      for t in self.trials]})

    @classmethod
    def from_json(cls, text: str) -> Verdict | None:
        try:
            data = json.loads(text)
            if data.get("version") != VERDICT_VERSION:
                return None
            return cls(tuple(Probed(KernelFamily(t["family"]), t["problem"], bool(t.get("refused")))
                             for t in data["trials"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def divergence(logits: np.ndarray, reference: np.ndarray) -> float:
    """||logits - reference|| / ||reference||; infinite where either holds a NaN or an infinity."""
    if not (np.all(np.isfinite(logits)) and np.all(np.isfinite(reference))) or logits.shape != reference.shape:
        return float("inf")
    scale = float(np.linalg.norm(reference)) or 1.0
    return float(np.linalg.norm(logits - reference)) / scale


def compared(family: KernelFamily, logits: np.ndarray | None, reference: np.ndarray | None, ended: str) -> Probed:
    """A family's trial from what its run left: its logits (None when it did not finish, `ended` says how)."""
    if logits is None:
        return Probed(family, ended, refused=ended.startswith(REFUSED))
    if reference is None:
        return Probed(family, None if np.all(np.isfinite(logits)) else "give NaN or infinite logits")
    off = divergence(logits, reference)
    return Probed(family, None if off <= TOLERANCE else f"give wrong logits ({off:.2f} off the plain kernels' answer)")


def verdict_key(host: HostKernels, system_info: str, model_kind: str) -> str:
    """One verdict per host, build and kind of model."""
    llama_version = _llama_cpp_version()
    text = "\n".join([host.cpu_model, " ".join(sorted(host.cpu_flags)), system_info, llama_version, model_kind])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def model_kind(gguf: Path) -> str:
    """The model's architecture and the types of its weights: what decides which kernels a forward pass runs."""
    import gguf as gguf_lib  # only where a verdict is looked up

    reader = gguf_lib.GGUFReader(gguf)
    field = reader.fields.get("general.architecture")
    arch = bytes(field.parts[field.data[0]]).decode() if field is not None else "?"
    types = sorted({t.tensor_type.name for t in reader.tensors})
    return f"{arch}:{','.join(types)}"


def prove(gguf: Path, host: HostKernels, threads: int, embeddings: bool = False,
          timeout_s: float = PROBE_TIMEOUT_S) -> Verdict:
    """Run the families of this host on `gguf` in child processes, fastest family first in the verdict."""
    started = time.monotonic()
    parse_faults(os.environ.get(FAULTS, ""))  # a mistyped drill is the operator's to fix, not a failed family
    families = host.families()
    fastest = families[0]
    with tempfile.TemporaryDirectory(prefix="pier-kernels-") as folder:
        out = Path(folder)
        runs = [KernelFamily.PLAIN] if fastest is KernelFamily.PLAIN else [KernelFamily.PLAIN, fastest]
        ended = _run_child(gguf, out, runs, threads, embeddings, refuse_amx=False, timeout_s=timeout_s)
        reference = _logits(out, KernelFamily.PLAIN)
        trials = {KernelFamily.PLAIN: compared(KernelFamily.PLAIN, reference, None, ended)}
        if fastest is not KernelFamily.PLAIN:
            if reference is None:  # the reference ended the child before the fastest family ran: alone, then
                ended = _run_child(gguf, out, [fastest], threads, embeddings, refuse_amx=False, timeout_s=timeout_s)
            trials[fastest] = compared(fastest, _logits(out, fastest), reference, ended)
        if fastest is KernelFamily.AMX and trials[KernelFamily.AMX].problem is not None:
            ended = _run_child(gguf, out, [KernelFamily.REPACK], threads, embeddings, refuse_amx=True,
                               timeout_s=timeout_s)
            trials[KernelFamily.REPACK] = compared(KernelFamily.REPACK, _logits(out, KernelFamily.REPACK), reference,
                                                   ended)
    ordered = tuple(trials[f] for f in families if f in trials)
    return Verdict(ordered, time.monotonic() - started)


def _run_child(gguf: Path, out: Path, families: Sequence[KernelFamily], threads: int, embeddings: bool,
               refuse_amx: bool, timeout_s: float) -> str:
    """Runs the families in order in one child; how the child ended, as the trial of a family it did not finish
    would read ("crash on this host (SIGSEGV)")."""
    command = [sys.executable, "-m", "pier.engine.kernel_probe", str(gguf), str(out),
               ",".join(f.value for f in families), "--threads", str(threads)]
    command += ["--embeddings"] * embeddings + ["--refuse-amx"] * refuse_amx
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"hang on this host (no answer in {timeout_s:.0f} s)"
    if done.returncode < 0:
        return f"crash on this host ({_signal_name(-done.returncode)})"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{REFUSED} (exit code {done.returncode}: {last})"
    return "did not run"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _logits(out: Path, family: KernelFamily) -> np.ndarray | None:
    path = out / f"{family.value}.npy"
    return np.load(path) if path.is_file() else None


def cached_verdict(cache: Path, key: str) -> Verdict | None:
    try:
        return Verdict.from_json((cache / f"{key}.json").read_text())
    except OSError:
        return None


def keep_verdict(cache: Path, key: str, verdict: Verdict) -> None:
    """Written whole or not at all (a temporary file renamed), so a copy killed midway leaves no verdict to trust."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=cache, delete=False, suffix=".tmp") as temporary:
            temporary.write(verdict.to_json())
        os.replace(temporary.name, cache / f"{key}.json")
    except OSError as error:  # a read-only cache: the next start proves again
        log.warning("could not keep the kernel verdict in %s (%s); the next start will prove the kernels again",
                    cache, error)


def _llama_cpp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return "unknown"


# -- the child -------------------------------------------------------------------------------------------------


def _forward(gguf: Path, family: KernelFamily, threads: int, embeddings: bool) -> np.ndarray:
    """One forward pass of PROMPT_TOKENS fixed tokens, then one more token alone: the last rows' logits (or the
    pooled embedding of an embedding model)."""
    import llama_cpp

    from pier.engine.llama import load_model

    model = load_model(gguf, extra_buffers=family is not KernelFamily.PLAIN)
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = params.n_batch = params.n_ubatch = 64
    params.n_threads = params.n_threads_batch = threads
    params.embeddings = embeddings
    params.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise SystemExit(f"llama.cpp could not create a context for {gguf}")
    vocab = llama_cpp.llama_model_get_vocab(model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    tokens = [(7 + 7919 * i) % n_vocab for i in range(PROMPT_TOKENS + 1)]
    rows = []
    for start, end in ((0, PROMPT_TOKENS), (PROMPT_TOKENS, PROMPT_TOKENS + 1)):
        chunk = (llama_cpp.llama_token * (end - start))(*tokens[start:end])  # alive while llama_decode reads it
        status = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(chunk, end - start))
        if status != 0:
            raise SystemExit(f"llama_decode answered {status} on {gguf}")
        if embeddings:
            pointer = llama_cpp.llama_get_embeddings_seq(ctx, 0) or llama_cpp.llama_get_embeddings_ith(ctx, -1)
            width = llama_cpp.llama_model_n_embd(model)
        else:
            pointer, width = llama_cpp.llama_get_logits_ith(ctx, -1), n_vocab
        rows.append(np.ctypeslib.as_array(pointer, shape=(width,)).copy())
        if embeddings:
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return np.stack(rows)


def parse_faults(text: str) -> dict[KernelFamily, str]:
    """PIER_KERNEL_PROBE_FAULTS as {family: kind}; raises ValueError naming what to write instead."""
    faults: dict[KernelFamily, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        family, _, kind = item.partition(":")
        if family not in set(KernelFamily) or kind not in FAULT_KINDS:
            raise ValueError(f"{FAULTS}={text!r}: write family:kind pairs, families {', '.join(KernelFamily)}, "
                             f"kinds {', '.join(FAULT_KINDS)} (e.g. repack:crash)")
        faults[KernelFamily(family)] = kind
    return faults


def _drill(kind: str | None, logits: np.ndarray) -> np.ndarray:
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        signal.pause()
    if kind == "wrong":
        return np.random.default_rng(0).standard_normal(logits.shape).astype(logits.dtype) * 10
    return logits


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pier.engine.kernel_probe",
                                     description="One forward pass per kernel family; logits as .npy files.")
    parser.add_argument("gguf", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("families")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--embeddings", action="store_true")
    parser.add_argument("--refuse-amx", action="store_true")
    args = parser.parse_args(argv)
    if args.refuse_amx:
        from pier.engine.amx_permission import refuse_amx

        refuse_amx()
    faults = parse_faults(os.environ.get(FAULTS, ""))
    for name in args.families.split(","):
        family = KernelFamily(name)
        logits = _drill(faults.get(family), _forward(args.gguf, family, args.threads, args.embeddings))
        np.save(args.out / f"{family.value}.npy", logits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
