"""Tests for the synthetic GGUF builder (pier.synthetic.builder)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gguf import TokenType

from pier.synthetic.builder import BENCH_360M, QUANTS, SMALL, TINY, ModelShape, build_gguf, describe, n_params
from pier.synthetic.vocab import CHATML_TEMPLATE, SPACE, build_vocab

PROMPT = b"the quick brown fox"


def _load(path: Path) -> Any:
    llama_cpp = pytest.importorskip("llama_cpp")
    # One thread: the model is tiny, and OpenMP threads that spin on a busy
    # machine are far slower than one.
    return llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, verbose=False)


def _greedy(llm: Any, prompt: bytes, n: int) -> list[int]:
    tokens = llm.tokenize(prompt)
    return list(itertools.islice(llm.generate(tokens, top_k=1, temp=0.0), n))


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf", TINY, "Q8_0")


@pytest.fixture(scope="module")
def tiny(tiny_path: Path) -> Any:
    return _load(tiny_path)


# --- llama.cpp loads and runs every quant ------------------------------------------


@pytest.mark.parametrize("quant", QUANTS)
def test_each_quant_loads_and_generates(tmp_path: Path, quant: str) -> None:
    path = build_gguf(tmp_path / f"tiny-{quant}.gguf", TINY, quant)
    llm = _load(path)
    assert llm.n_vocab() == TINY.n_vocab
    assert (llm.token_bos(), llm.token_eos()) == (1, 2)
    out = _greedy(llm, PROMPT, 8)
    assert len(out) == 8
    assert all(0 <= t < TINY.n_vocab for t in out)


def test_greedy_output_is_varied_whole_words(tiny: Any) -> None:
    out = _greedy(tiny, PROMPT, 32)
    assert len(set(out)) >= 16, out
    # Non-word output rows are damped: every generated token is one word.
    pieces = [tiny.detokenize([t]).decode() for t in out]
    assert all(p.startswith(" ") and p[1:].isalpha() for p in pieces if p not in ".,!?"), pieces


def test_top_two_logits_are_rarely_tied(tiny_path: Path) -> None:
    # Batched and unbatched decoding differ by float rounding; the weight scales must
    # keep the top-1/top-2 gap well above that most of the time.
    llama_cpp = pytest.importorskip("llama_cpp")
    llm = llama_cpp.Llama(model_path=str(tiny_path), n_ctx=256, n_threads=1, logits_all=True, verbose=False)
    gaps = []
    for prompt in (PROMPT, b"hello world", b"I like green apples"):
        llm.reset()
        llm.eval(llm.tokenize(prompt))
        for _ in range(32):
            logits = np.asarray(llm.scores[llm.n_tokens - 1])
            top2 = np.sort(logits)[-2:]
            gaps.append(float(top2[1] - top2[0]))
            llm.eval([int(np.argmax(logits))])
    assert np.median(gaps) > 0.3
    assert np.percentile(gaps, 10) > 0.03


# --- tokenizer ------------------------------------------------------------------------


def test_plain_words_are_single_tokens(tiny: Any) -> None:
    tokens = tiny.tokenize(PROMPT, add_bos=False)
    assert [tiny.detokenize([t]) for t in tokens] == [b" the", b" quick", b" brown", b" fox"]
    # SPM adds a leading space; llama-cpp-python strips it again only after a BOS.
    assert tiny.detokenize(tokens) == b" " + PROMPT
    assert tiny.detokenize(tiny.tokenize(PROMPT)) == PROMPT


@pytest.mark.parametrize(
    "text",
    [
        "the quick brown fox",
        "zqxv xylophonic",  # not in the vocabulary: characters
        "é中€",  # multi-byte characters with their own token
        "日本語 テスト",  # no token: UTF-8 byte fallback
        "tabs\tand\nnewlines",
        "  two  spaces ",
        "<s> and <|im_end|> as plain text",
    ],
)
def test_text_round_trips(tiny: Any, text: str) -> None:
    data = text.encode()
    assert tiny.detokenize(tiny.tokenize(data)) == data


def test_unknown_word_falls_back_to_characters(tiny: Any) -> None:
    tokens = tiny.tokenize(b"zqxv", add_bos=False)
    pieces = [tiny.detokenize([t]) for t in tokens]
    assert b"".join(pieces) == b" zqxv"
    assert pieces[-3:] == [b"q", b"x", b"v"]


def test_multibyte_characters_are_single_tokens(tiny: Any) -> None:
    tokens = tiny.tokenize("é中€".encode(), add_bos=False)
    assert [tiny.detokenize([t]) for t in tokens] == [b" ", *(c.encode() for c in "é中€")]


def test_chat_special_tokens(tiny: Any) -> None:
    tokens = tiny.tokenize(b"<|im_start|>user<|im_end|>", add_bos=False, special=True)
    assert tokens[0] == 3 and tokens[-1] == 4
    assert tiny.metadata["tokenizer.ggml.eot_token_id"] == "4"
    assert tiny.metadata["tokenizer.ggml.add_bos_token"] == "true"


@pytest.mark.parametrize("n_vocab", [TINY.n_vocab, SMALL.n_vocab, BENCH_360M.n_vocab, 400])
def test_vocab_layout(n_vocab: int) -> None:
    vocab = build_vocab(n_vocab)
    assert len(vocab.tokens) == len(set(vocab.tokens)) == len(vocab.scores) == len(vocab.types) == n_vocab
    assert vocab.tokens[:5] == ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    assert vocab.types[0] == TokenType.UNKNOWN
    assert set(vocab.types[1:5]) == {TokenType.CONTROL}
    assert vocab.tokens[5:261] == [f"<0x{b:02X}>" for b in range(256)]
    assert set(vocab.types[5:261]) == {TokenType.BYTE}
    # Prefix closure: llama.cpp's SPM merges climb "▁w" -> "▁wo" -> "▁wor" -> "▁word".
    present = set(vocab.tokens)
    assert all(t[:-1] in present for t in vocab.tokens if t.startswith(SPACE) and len(t) > 2)
    assert {SPACE + w for w in ("the", "quick", "brown", "fox")} <= vocab.words or n_vocab < 1000
    # llama-cpp-python detokenizes through a 32-byte buffer per token.
    assert max(len(t.encode()) for t in vocab.tokens) <= 32


def test_chat_template_is_stored_and_renders(tiny: Any) -> None:
    assert tiny.metadata["tokenizer.chat_template"] == CHATML_TEMPLATE
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # The environment Hugging Face's apply_chat_template uses.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    rendered = env.from_string(CHATML_TEMPLATE).render(messages=messages, add_generation_prompt=True, bos_token="<s>")
    assert rendered == (
        "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"
    )


def test_llama_cpp_chat_completion_uses_template(tiny: Any) -> None:
    reply = tiny.create_chat_completion(messages=[{"role": "user", "content": "hello"}], max_tokens=4, temperature=0.0)
    assert reply["usage"]["completion_tokens"] == 4
    assert reply["choices"][0]["message"]["content"]


# --- determinism, metadata, validation ------------------------------------------------


def test_same_seed_same_bytes_other_seed_differs(tmp_path: Path) -> None:
    a = build_gguf(tmp_path / "a.gguf", TINY, "Q4_0", seed=7).read_bytes()
    b = build_gguf(tmp_path / "b.gguf", TINY, "Q4_0", seed=7).read_bytes()
    c = build_gguf(tmp_path / "c.gguf", TINY, "Q4_0", seed=8).read_bytes()
    assert a == b
    assert a != c and len(a) == len(c)


def test_describe_reads_back_metadata(tiny_path: Path) -> None:
    info = describe(tiny_path)
    assert info["architecture"] == "llama"
    assert info["name"] == "pier-synthetic"
    assert info["quant"] == "Q8_0"
    assert info["n_params"] == n_params(TINY)
    assert info["file_size"] == tiny_path.stat().st_size
    assert info["shape"] == dataclasses.asdict(TINY)


def test_parameter_counts() -> None:
    assert 330e6 <= n_params(BENCH_360M) <= 400e6
    assert 20e6 <= n_params(SMALL) <= 40e6
    assert n_params(TINY) < 1e6


def test_bad_quant_names_allowed_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'Q5_K'.*allowed values: Q4_0, Q8_0, F16, F32"):
        build_gguf(tmp_path / "x.gguf", TINY, "Q5_K")


@pytest.mark.parametrize(
    ("changes", "quant", "message"),
    [
        ({"n_head": 5}, "F16", r"n_embd \(64\) must be divisible by n_head \(5\).*e\.g\. 2, 4 or 8"),
        ({"n_head_kv": 3}, "F16", r"n_head \(4\) must be divisible by n_head_kv \(3\).*from 1, 2 or 4"),
        ({"n_embd": 72, "n_head": 4}, "Q8_0", r"n_embd \(72\) must be a multiple of 32.*use 64 or 96"),
        ({"n_ff": 100}, "Q4_0", r"n_ff \(100\) must be a multiple of 32.*or quant F16/F32"),
        ({"n_embd": 60, "n_head": 4}, "F32", r"head dimension .* = 15 must be even"),
        ({"n_vocab": 300}, "Q8_0", r"n_vocab \(300\) is too small.*use n_vocab >= \d+"),
        ({"n_layer": 0}, "Q8_0", r"n_layer must be positive"),
    ],
)
def test_bad_shape_says_what_to_change(tmp_path: Path, changes: dict[str, int], quant: str, message: str) -> None:
    shape = dataclasses.replace(TINY, **changes)
    with pytest.raises(ValueError, match=message):
        build_gguf(tmp_path / "x.gguf", shape, quant)
    assert not (tmp_path / "x.gguf").exists()


def test_unquantized_types_accept_any_even_head_dim(tmp_path: Path) -> None:
    shape = ModelShape(n_vocab=1000, n_embd=72, n_layer=1, n_ff=100, n_head=4, n_head_kv=4)
    path = build_gguf(tmp_path / "odd.gguf", shape, "F16")
    assert describe(path)["shape"]["n_embd"] == 72


def test_embedding_models_declare_their_pooling(embedding_ggufs: dict[str, Path]) -> None:
    from gguf import GGUFReader

    for pooling, path in embedding_ggufs.items():
        fields = GGUFReader(path).fields
        assert int(fields["llama.pooling_type"].parts[-1][0]) == {"mean": 1, "cls": 2, "last": 3}[pooling]
        assert bool(fields["llama.attention.causal"].parts[-1][0]) is (pooling == "last")


def test_an_unknown_pooling_is_refused(tmp_path: Path) -> None:
    from pier.synthetic.builder import TINY, build_gguf

    with pytest.raises(ValueError, match="pooling must be one of mean, cls, last"):
        build_gguf(tmp_path / "x.gguf", TINY, pooling="max")
