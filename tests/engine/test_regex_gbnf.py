"""Regexes as grammars (TGI's regex grammar): every output of the fake runner under the grammar is a full match
under Python's `re`, greedy and sampled; what a grammar cannot express is refused by name."""

from __future__ import annotations

import json
import re

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.regex_gbnf import UnsupportedRegex, regex_expression, regex_to_gbnf
from pier.engine.request import GenerateRequest, SamplingParams

from .conftest import grammar_accepts, run

PATTERNS = [
    r"^[a-z]{1,8}@[a-z]{2,5}\.com$", r"\d{3}-\d{4}", r"(yes|no)", r"\w{1,4}\s?\W", r"a.{1,5}?b",
    r"[^0-9]{2,4}", r"(?:ab){1,3}c?", r"(?P<x>[A-Z])\d", r'[\-\]\\"x]{3}', r"\D\S", r"(\+|-)?[1-9][0-9]{0,3}",
    r"é{1,2}中?€",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_output_matches_the_pattern_whole(pattern: str) -> None:
    grammar = regex_to_gbnf(pattern)
    core = EngineCore(FakeRunner(), EngineConfig(max_running=8, step_tokens=64))
    requests = [GenerateRequest(f"r{i}", "hello world", SamplingParams(temperature=t, seed=i, grammar=grammar),
                                max_tokens=60) for i, t in enumerate([0.0, 0.8, 1.0, 1.5, 2.0, 1.0, 1.0, 1.0])]
    out = run(core, *requests)
    for request in requests:
        assert re.fullmatch(pattern, out.text(request.request_id)), out.text(request.request_id)


@pytest.mark.parametrize(("pattern", "named"), [
    (r"(?=a)b", "lookahead"), (r"a(?!b)", "negative lookaround"), (r"(a)\1", "backreference"),
    (r"a\bb", "word boundary"), (r"(?i)abc", "inline flags"), (r"a^b", "anchor"), (r"(?i:a)b", "flags in a group"),
    (r"[a-", "does not parse"), ("(" * 5000 + "a" + ")" * 5000, "nests groups too deeply"),
])
def test_what_a_grammar_cannot_express_is_refused(pattern: str, named: str) -> None:
    with pytest.raises(UnsupportedRegex, match=re.escape(named)):
        regex_to_gbnf(pattern)


@pytest.mark.parametrize(("pattern", "gbnf"), [
    (r"^ab$", 'root ::= "a" "b"'),
    (r"a{2,}b{3}c{0,2}d*e+f?", 'root ::= ("a"){2,} ("b"){3} ("c"){0,2} ("d")* ("e")+ ("f")?'),
    (r"[^\d_]", r"root ::= [^0-9\x5F]"),
    (r'"', r'root ::= "\x22"'),
])
def test_the_grammar_written(pattern: str, gbnf: str) -> None:
    assert regex_to_gbnf(pattern) == gbnf


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    (r'a"b', [r'a\"b'], ['a"b']),
    (r"a.b", ["axb", "a b"], ['a"b', "a\\b", "a\tb"]),
    (r'[\\"x]+', [r'\\x\"'], ['"', "\\"]),
    (r"[^a]", ["b"], ['"', "\\", "\n", "a"]),
    (r"\n", ["\\n"], ["\n"]),
    (r"é{2}", ["éé"], ["\\u00e9\\u00e9"]),
])
def test_inside_a_json_string_the_pattern_is_written_escaped(pattern: str, inside: list[str],
                                                             outside: list[str]) -> None:
    grammar = f"root ::= {regex_expression(pattern, json_string=True)}"
    assert grammar_accepts(grammar, *inside) == [True] * len(inside)
    assert grammar_accepts(grammar, *outside) == [False] * len(outside)
    for text in inside:
        assert re.fullmatch(pattern, json.loads(f'"{text}"'))
