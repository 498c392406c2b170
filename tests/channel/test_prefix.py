from __future__ import annotations

import json

import pytest

from pier.channel.prefix import prefix_blocks, prompt_text, request_prefix

PARTS = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
SYSTEM = "You are a careful assistant. " * 10  # 290 characters: two whole blocks


def body(payload: object) -> bytes:
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (body({"inputs": "the cat", "parameters": {"max_new_tokens": 3}}), "the cat"),
        (body({"prompt": "once upon"}), "once upon"),
        (body({"prompt": [1, 2, 3]}), "1 2 3"),
        (body({"prompt": ["first", "second"]}), "first"),
        (body({"prompt": [[7, 8], [9]]}), "7 8"),
        (body({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]}),
         "system\x1fS\x1euser\x1fU\x1e"),
        (body({"messages": [PARTS]}),
         "user\x1fab\x1e"),
        (body({"instructions": "S", "input": "U"}), "system\x1fS\x1euser\x1fU\x1e"),
        (body({"input": [PARTS | {"content": [{"type": "input_text", "text": "ab"}]}]}), "user\x1fab\x1e"),
        (body({"input": [{"role": "user", "content": "U"}, {"type": "function_call", "name": "f", "arguments": "{}"},
                         {"type": "function_call_output", "call_id": "c", "output": "18"}]}),
         "user\x1fU\x1eassistant\x1ff{}\x1etool\x1f18\x1e"),
        (body({"input": []}), ""),
        (body({"something": "else"}), ""),
        (body({"inputs": 5}), ""),
        (body([1, 2]), ""),
        (b"not json", ""),
        (b"{broken", ""),
        (b"", ""),
    ],
)
def test_prompt_text(raw: bytes, expected: str) -> None:
    assert prompt_text(raw) == expected


@pytest.mark.parametrize(
    ("text", "blocks"),
    [("", 0), ("x" * 127, 0), ("x" * 128, 1), ("x" * 300, 2), ("x" * 100_000, 32)],
)
def test_only_whole_blocks_count_up_to_a_limit(text: str, blocks: int) -> None:
    assert len(prefix_blocks(text)) == blocks


def test_blocks_are_cumulative() -> None:
    a = prefix_blocks("A" * 128 + "B" * 128 + "C" * 128)
    b = prefix_blocks("A" * 128 + "B" * 128 + "D" * 128)
    c = prefix_blocks("Z" * 128 + "B" * 128 + "C" * 128)
    assert a[:2] == b[:2] and a[2] != b[2]
    assert not set(a) & set(c)  # the same second block after a different first is a different prefix


def test_chats_sharing_a_system_prompt_share_its_blocks() -> None:
    def chat(question: str) -> bytes:
        return body({"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]})

    first, second = request_prefix(chat("What is 2 + 2?")), request_prefix(chat("Name a colour."))
    assert len(first) == len(second) == 2 and first == second
    assert request_prefix(body({"inputs": SYSTEM})) != first  # the rendering differs from a bare prompt


def test_surrogates_in_text_do_not_break_hashing() -> None:
    assert len(prefix_blocks("\ud800" * 128)) == 1
