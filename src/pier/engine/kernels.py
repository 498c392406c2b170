"""Which of llama.cpp's CPU kernel families a copy computes with, and how pier says so.

llama.cpp's CPU backend multiplies weights in one of three ways, fastest first:
- **AMX**: weights repacked for Intel's AMX tiles (Sapphire Rapids and later), in builds compiled with AMX;
- **repack**: weights repacked for the host's vector units (AVX-512 or AVX2 on x86-64, NEON/SVE on ARM);
- **plain**: the weights as the GGUF stores them, through ggml's dot products (still AVX-512/AVX2/NEON).
The first two are llama.cpp's "extra buffer types". On some hosts the AMX kernels crash on the first forward pass
(a SIGSEGV in ggml_backend_amx_mul_mat: docs/benchmarks.md, "AMX hosts"); any family could also compute wrong on
an unusual CPU or VM. So a copy proves the families it may use (`pier.engine.kernel_probe`) and takes the fastest
that works. Everything here is pure: the host's CPU flags and the build's `llama_print_system_info` line in, the
families and the words out.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class KernelFamily(StrEnum):
    AMX = "amx"
    REPACK = "repack"
    PLAIN = "plain"


@dataclass(frozen=True)
class HostKernels:
    """What this host and this build of llama.cpp offer: the CPU's flags (/proc/cpuinfo) and the build's features."""

    machine: str  # platform.machine(): x86_64, aarch64, ...
    cpu_flags: frozenset[str]
    build_features: Mapping[str, str]  # llama_print_system_info's CPU part: {"AVX512": "1", "AMX_INT8": "1", ...}
    cpu_model: str = ""

    @property
    def amx(self) -> bool:
        """Whether the build has AMX kernels and the CPU has AMX: only then can the AMX family run."""
        return self.build_features.get("AMX_INT8") == "1" and "amx_int8" in self.cpu_flags

    @property
    def repack(self) -> bool:
        return self.build_features.get("REPACK") == "1" or self.build_features.get("KLEIDIAI") == "1"

    def families(self) -> list[KernelFamily]:
        """The families a copy may use here, fastest first; plain is always there."""
        found = [KernelFamily.AMX] if self.amx else []
        if self.repack:
            found.append(KernelFamily.REPACK)
        return [*found, KernelFamily.PLAIN]

    def name(self, family: KernelFamily) -> str:
        """A family as a user reads it: "AVX-512 repack kernels" on this host."""
        if family is KernelFamily.AMX:
            return "AMX kernels"
        if family is KernelFamily.PLAIN:
            return f"plain {self.vector_units()} kernels (no repacked weights)"
        return f"{self.vector_units()} repack kernels"

    def vector_units(self) -> str:
        features = self.build_features
        if features.get("AVX512") == "1":
            return "AVX-512"
        if features.get("AVX2") == "1":
            return "AVX2"
        if features.get("SVE") == "1":
            return "SVE"
        if features.get("NEON") == "1":
            return "NEON"
        return "reference"

    def summary(self) -> str:
        """One line for `pier up` and the bench's JSON: the CPU, its vector/matrix flags, the build's features."""
        wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16", "asimd", "sve")
        flags = " ".join(f for f in wanted if f in self.cpu_flags) or "none of note"
        built = " ".join(k for k, v in self.build_features.items() if v == "1") or "none"
        return f"{self.cpu_model or self.machine}: CPU flags {flags}; llama.cpp CPU build: {built}"


def parse_system_info(line: str) -> dict[str, str]:
    """The CPU backend's features from llama_print_system_info ("CPU : SSE3 = 1 | AVX2 = 1 | ... | REPACK = 1 |"):
    items are split by "|", and an item holding " : " starts the next backend's."""
    features: dict[str, str] = {}
    backend = None
    for item in line.split("|"):
        if " : " in item:
            name, _, item = item.partition(" : ")
            backend = name.strip()
        key, sep, value = item.partition("=")
        if backend == "CPU" and sep:
            features[key.strip()] = value.strip()
    return features


def parse_cpuinfo(text: str) -> tuple[str, frozenset[str]]:
    """The CPU's model name and flags from /proc/cpuinfo (x86 "flags", ARM "Features")."""
    model, flags = "", frozenset[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    return model, flags


def read_host(system_info: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> HostKernels:
    try:
        model, flags = parse_cpuinfo(cpuinfo.read_text())
    except OSError:
        model, flags = "", frozenset()
    return HostKernels(platform.machine(), flags, parse_system_info(system_info), model)


def host_line() -> str:
    """This host's CPU flags and the installed llama.cpp build's features, with the build's own
    llama_print_system_info line: for `pier up`'s log and `pier bench`'s JSON, so figures say which kernels made
    them. Imports llama.cpp lazily (a gateway or a bench never loads a model)."""
    try:
        import llama_cpp

        info = bytes(llama_cpp.llama_print_system_info()).decode("utf-8", "replace").strip()
    except (ImportError, OSError) as error:
        return f"{read_host('').summary()} (llama.cpp not loadable here: {error})"
    return f"{read_host(info).summary()} | llama_print_system_info: {info}"


@dataclass(frozen=True)
class Probed:
    """How one family fared in the probe: None problem means it ran and agreed with the reference."""

    family: KernelFamily
    problem: str | None  # "crash on this host (SIGSEGV)", "give wrong logits (...)"
    refused: bool = False  # llama.cpp refused the model with an error of its own (a bad file, not the kernels)


def chosen(trials: Sequence[Probed]) -> KernelFamily | None:
    """The first family (trials are fastest first) that worked."""
    return next((t.family for t in trials if t.problem is None), None)


def notice(host: HostKernels, trials: Sequence[Probed]) -> str:
    """What a copy says once about its kernels: "AMX kernels crash on this host (SIGSEGV); using AVX-512 repack
    kernels", or just "AVX-512 repack kernels" where the fastest family worked."""
    family = chosen(trials)
    failed = [f"{host.name(t.family)} {t.problem}" for t in trials if t.problem is not None
              and (family is None or list(KernelFamily).index(t.family) < list(KernelFamily).index(family))]
    if family is None:
        return "no kernel family works here: " + "; ".join(failed)
    using = host.name(family)
    return f"{'; '.join(failed)}; using {using}" if failed else using


if __name__ == "__main__":  # `python -m pier.engine.kernels`: the host line, from a process that may load llama.cpp
    print(host_line())
