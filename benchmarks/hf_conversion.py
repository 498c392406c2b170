"""Converting a Hugging Face checkpoint to GGUF as the gateway does (issue 39): time and peak memory.

    python benchmarks/hf_conversion.py [--precisions f16 q4_k_m] [--repeats 1]

A 1.1B-parameter Llama (TinyLlama's shape: 22 layers, n_embd 2048, n_ff 5632, 32 heads, 4 KV heads, 32,000-token
vocabulary) with random BF16 weights, saved once by transformers' save_pretrained as one safetensors file and as
five shards of 500 MB (with its index), is converted by `pier.control.fetch.conversion.Conversions` into a fresh
store each time: llama.cpp's convert_hf_to_gguf.py, then for q4_k_m llama.cpp's quantizer, each a child process.
Peak memory is the largest child's resident set (getrusage RUSAGE_CHILDREN); the gateway's own is not counted.
Needs the [hf] extra's packages; the checkpoints (4.4 GB) are kept in ~/.cache/pier/bench-hf.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pier.control.fetch.conversion import Conversions

SHAPE = {"vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
         "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048, "bos_token_id": 1,
         "eos_token_id": 2, "tie_word_embeddings": False}
LAYOUTS = {"one file": "50GB", "5 shards": "500MB"}


def checkpoints(root: Path) -> dict[str, Path]:
    """The two layouts of the same random model, made once."""
    folders = {name: root / name.replace(" ", "-") for name in LAYOUTS}
    if all((f / "config.json").is_file() for f in folders.values()):
        return folders
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo's tests/ (its tokenizer maker)
    from tests.checkpoints import tokenizer_model

    with torch.device("meta"):
        model: Any = LlamaForCausalLM(LlamaConfig(**SHAPE))
    model = model.to_empty(device="cpu").to(torch.bfloat16)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.02)
    for name, folder in folders.items():
        model.save_pretrained(folder, max_shard_size=LAYOUTS[name])
        (folder / "tokenizer.model").write_bytes(tokenizer_model())
    return folders


def convert(folder: Path, precision: str) -> dict[str, float]:
    store = Path(tempfile.mkdtemp(prefix="bench-hf-store-"))
    marks: dict[str, float] = {}
    started = time.monotonic()

    def report(step: str) -> None:
        if step.startswith("quantizing") and "quantize" not in marks:
            marks["quantize"] = time.monotonic() - started

    try:
        served = next(Conversions(store).serve(folder, precision, report).glob("*.gguf"))
        total = time.monotonic() - started
        return {"total_s": total, "convert_s": marks.get("quantize", total),
                "quantize_s": total - marks.get("quantize", total), "gguf_gb": served.stat().st_size / 1e9,
                "peak_child_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9}
    finally:
        shutil.rmtree(store, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--precisions", nargs="+", default=["f16", "q4_k_m"])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--root", type=Path, default=Path.home() / ".cache" / "pier" / "bench-hf")
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "PRECISION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one conversion in a process of its own, so its children's peak is its alone
        print(json.dumps({k: round(v, 2) for k, v in convert(Path(args.one[0]), args.one[1]).items()}))
        return
    folders = checkpoints(args.root)
    for _ in range(args.repeats):
        for layout, folder in folders.items():
            for precision in args.precisions:
                done = subprocess.run([sys.executable, __file__, "--one", str(folder), precision], check=True,
                                      capture_output=True, text=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                print(json.dumps({"layout": layout, "precision": precision, **result}), flush=True)


if __name__ == "__main__":
    main()
