"""A llama.cpp vocabulary with exactly the FakeRunner's tokens, so llama.cpp's grammar sampler (which reads token
pieces from a `llama_vocab`) constrains the fake runner as it does a real model.

It is a vocabulary-only GGUF (SPM: control tokens, the 256 byte tokens, whole words with `▁`), written once per
process to a temporary file and loaded with `vocab_only`, which skips the (absent) weights.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
from gguf import GGUFWriter, TokenType

_lock = threading.Lock()
_loaded: dict[tuple[bytes, ...], llama_cpp.llama_model_p] = {}  # kept for the process: vocabularies are tiny

_SPECIAL = {0: ("<unk>", TokenType.UNKNOWN), 1: ("<s>", TokenType.CONTROL), 2: ("</s>", TokenType.CONTROL)}


def fake_vocab(pieces: Sequence[bytes]) -> llama_cpp.llama_vocab_p:
    """The vocabulary whose token i reads `pieces[i]` (ids 0-2 are unk, BOS, EOS; one-byte pieces are bytes)."""
    key = tuple(pieces)
    with _lock:
        model = _loaded.get(key)
        if model is None:
            model = _loaded[key] = _load(key)
    return llama_cpp.llama_model_get_vocab(model)


def _load(pieces: tuple[bytes, ...]) -> llama_cpp.llama_model_p:
    from pier.engine import llama_log

    llama_log.install()  # the loader's chatter goes to debug logging, not stderr
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "fake-vocab.gguf"
        _write(path, pieces)
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise RuntimeError("llama.cpp could not load the fake runner's vocabulary")
    return model


def _write(path: Path, pieces: tuple[bytes, ...]) -> None:
    texts, types = zip(*(_token(i, piece) for i, piece in enumerate(pieces)), strict=True)
    writer = GGUFWriter(str(path), "llama")
    for add, value in ((writer.add_context_length, 4096), (writer.add_embedding_length, 64),
                       (writer.add_block_count, 1), (writer.add_feed_forward_length, 64),
                       (writer.add_head_count, 1), (writer.add_head_count_kv, 1)):
        add(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(list(texts))
    writer.add_token_scores([0.0] * len(texts))
    writer.add_token_types(list(types))
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()


def _token(i: int, piece: bytes) -> tuple[str, TokenType]:
    if i in _SPECIAL:
        return _SPECIAL[i]
    if len(piece) == 1:
        return f"<0x{piece[0]:02X}>", TokenType.BYTE
    return piece.decode("utf-8").replace(" ", "\u2581"), TokenType.NORMAL
