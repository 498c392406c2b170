"""llama.cpp's quantizer on one GGUF, in a process of its own: `python -m pier.model.quantize IN OUT TYPE`.

The gateway runs it after converting a checkpoint when HF_MODEL_QUANTIZE asks for a type the converter does not
write itself (q4_k_m, q6_k, ...); a process of its own keeps the quantizer's minutes of CPU and its memory off the
gateway, and a crash in it from taking the gateway down. Exit 0 when OUT is complete, 1 (with the reason on stderr)
otherwise.
"""

from __future__ import annotations

import os
import sys


def ftype(name: str) -> int:
    """llama.cpp's file type for a GGUF type name such as q4_k_m (LLAMA_FTYPE_MOSTLY_Q4_K_M)."""
    import llama_cpp

    value = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{name.upper()}", None)
    if not isinstance(value, int):
        raise ValueError(f"llama.cpp has no quantization type {name!r}")
    return value


def quantize(source: str, target: str, name: str, threads: int = 0) -> None:
    import llama_cpp

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype(name)
    params.nthread = threads or (os.cpu_count() or 1)
    if llama_cpp.llama_model_quantize(source.encode(), target.encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not quantize {source} to {name} (its log above says why)")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m pier.model.quantize IN.gguf OUT.gguf TYPE", file=sys.stderr)
        return 2
    try:
        quantize(argv[0], argv[1], argv[2])
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
