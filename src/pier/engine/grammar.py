"""GBNF grammars compiled into llama.cpp's grammar sampler, which constrains each step to the tokens the grammar
still allows (structured output, forced tool calls).

llama.cpp reports why a grammar does not compile in two places: the GBNF parser writes to stderr, the rest goes
through its log callback. Both are caught while a grammar compiles, so the 400 names the problem, not just the
fact. Compiling is cheap (a JSON schema's grammar takes about a millisecond), so a request is compiled once to
check it and again for its sequence.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import llama_cpp

from pier.errors import InvalidRequest

ROOT = "root"
MAX_NESTING = 2000
_capture_lock = threading.Lock()
_captured = threading.local()  # lines llama.cpp logged on this thread while a grammar compiled


class InvalidGrammar(InvalidRequest):
    """A grammar llama.cpp cannot compile; the message carries llama.cpp's own words for why."""


def compile_grammar(vocab: llama_cpp.llama_vocab_p, grammar: str,
                    triggers: tuple[str, ...] = ()) -> llama_cpp.llama_sampler_p:
    """llama.cpp's grammar sampler for `grammar` (GBNF, rule `root` first to match), lazy when it has `triggers`
    (see SamplingParams.grammar_triggers); the caller frees it. Raises InvalidGrammar naming what llama.cpp found
    wrong."""
    if not grammar.strip():
        raise InvalidGrammar("The grammar is empty: give GBNF text with a `root ::= ...` rule.", param="grammar")
    depth = nesting(grammar)
    if depth > MAX_NESTING:  # llama.cpp's parser recurses per level: ~20,000 overflow the stack and kill the process
        raise InvalidGrammar(
            f"The grammar nests groups {depth} deep; at most {MAX_NESTING} are accepted. Use fewer nested groups "
            "(a schema's maxLength/maxItems or a regex's {m,n} in the thousands writes one level per item).",
            param="grammar")
    with _llama_messages() as messages:
        if triggers:
            patterns = (ctypes.c_char_p * len(triggers))(*(t.encode("utf-8") for t in triggers))
            sampler = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
                vocab, grammar.encode("utf-8"), ROOT.encode(), patterns, len(triggers), None, 0)
        else:
            sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode("utf-8"), ROOT.encode())
    if not sampler:
        raise InvalidGrammar(_refusal(messages), param="grammar")
    return sampler


def nesting(grammar: str) -> int:
    """How deep parentheses nest in GBNF text, outside string literals, character classes and comments."""
    depth = deepest = 0
    i, n = 0, len(grammar)
    while i < n:
        c = grammar[i]
        if c in "\"[":  # a literal or a class: skip to its unescaped end
            end = '"' if c == '"' else "]"
            i += 1
            while i < n and grammar[i] != end:
                i += 2 if grammar[i] == "\\" else 1
        elif c == "#":
            while i < n and grammar[i] != "\n":
                i += 1
        elif c == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return deepest


def check_grammar(vocab: llama_cpp.llama_vocab_p, grammar: str) -> None:
    llama_cpp.llama_sampler_free(compile_grammar(vocab, grammar))


def _refusal(messages: list[str]) -> str:
    lines = [line.strip() for text in messages for line in text.splitlines() if line.strip()]
    why = next((line.split("error parsing grammar:", 1)[1].strip() for line in lines
                if "error parsing grammar:" in line), None)
    why = why or next((line for line in lines if "grammar" in line and "failed to parse" not in line), None)
    detail = f": {why}" if why else ""
    return (f"The grammar does not compile{detail}. Write it in llama.cpp's GBNF (rules `name ::= ...`, a `root` "
            "rule, every rule referenced defined, no left recursion).")


@contextmanager
def _llama_messages() -> Iterator[list[str]]:
    """What llama.cpp writes to stderr (fd 2) and to its log on this thread meanwhile. Other threads' stderr
    in that millisecond is written back to stderr afterwards, so nothing is lost."""
    messages: list[str] = []
    with _capture_lock, tempfile.TemporaryFile() as sink:
        _install_log_hook()
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        _captured.lines = messages
        try:
            yield messages
        finally:
            _captured.lines = None
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            messages.append(text)
            others = [line for line in text.splitlines(keepends=True) if not _from_grammar(line)]
            if others:
                sys.stderr.write("".join(others))


def _from_grammar(line: str) -> bool:
    return "grammar" in line or "::=" in line or not line.strip()


_hook_installed = False


def _install_log_hook() -> None:
    """Route llama.cpp's log to Python's logging, and to the capture of the thread that is compiling."""
    global _hook_installed
    if not _hook_installed:
        from pier.engine import llama_log

        llama_log.install(_on_log)
        _hook_installed = True


def _on_log(text: str) -> None:
    lines = getattr(_captured, "lines", None)
    if lines is not None:
        lines.append(text)


def allows(grammar: llama_cpp.llama_sampler_p, token: int) -> bool:
    """Would the grammar, in its current state, let `token` come next? (Applying it to a one-token candidate
    list: llama.cpp sets a refused token's logit to -inf.) Accepting a refused token would abort the process."""
    data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(id=token, logit=0.0, p=0.0))
    array = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(grammar, ctypes.byref(array))
    return bool(data[0].logit != -float("inf"))
