"""A deterministic stand-in for llama.cpp, so engine and server tests run in milliseconds without a model.

It keeps a real model of a unified KV cache (cells shared between sequences by `copy`, freed when no
sequence holds them, a fixed number of them) and checks positions like llama.cpp does. Its logits are a
pure function of the *whole* token history of a sequence, so a cache bug that corrupts or mixes up a
sequence's KV changes the output, as it would with a real model. Saving a sequence's state and restoring it
follow the runner's contract (runner.py): the saved bytes carry the tokens and their positions (standing in for
their K and V rows, `state_bytes_per_token` each); a state saved from position 0 empties the destination first,
one saved from further on goes after the prefix the destination holds, and a restore fails when fewer cells are
free than the state holds.
"""

from __future__ import annotations

import hashlib

import llama_cpp
import numpy as np

from pier.engine.fake_vocab import fake_vocab
from pier.engine.runner import Batch, KvCacheFull, ModelInfo, SeqState

WORDS = ["hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "é", "中", "€"]


class FakeRunner:
    """Vocabulary: 0 <unk>, 1 <s>, 2 </s>, then the 256 bytes, then whole words (with a leading space)."""

    BOS, EOS, FIRST_BYTE = 1, 2, 3

    def __init__(
        self, n_ctx: int = 512, n_seq_max: int = 16, n_batch: int = 64, eos_every: int = 0,
        script: dict[int, int] | None = None, state_bytes_per_token: int = 64,
    ) -> None:
        self.n_ctx, self.n_seq_max, self.n_batch = n_ctx, n_seq_max, n_batch
        self._state_words = max(2, state_bytes_per_token // 4)  # int32s per saved token: the token, its position, zeros
        self._eos_every = eos_every  # >0: EOS becomes the argmax at every eos_every-th position
        self._script = script or {}  # history length -> the token that becomes the argmax there
        self._pieces = [b"", b"", b""] + [bytes([b]) for b in range(256)] + [(" " + w).encode() for w in WORDS]
        self._word_ids = {p: i for i, p in enumerate(self._pieces) if len(p) > 1}
        self.info = ModelInfo(
            name="fake", path="<fake>", n_vocab=len(self._pieces), n_ctx_train=4096, bos=self.BOS,
            eos=self.EOS, add_bos=True,
            chat_template="{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}",
        )
        self._seqs: dict[int, list[tuple[int, int]]] = {}  # seq id -> [(cell id, token)] by position
        self._refs: dict[int, int] = {}  # cell id -> sequences holding it
        self._next_cell = 0
        self.decode_calls = 0
        self.decoded_tokens = 0
        self.saves = 0
        self.restores = 0

    @property
    def used_cells(self) -> int:
        return len(self._refs)

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        """Like SPM with a space prefix: known words are one token each, anything else falls back to bytes."""
        tokens = [self.BOS] if add_bos else []
        for word in text.split(" "):
            piece = (" " + word).encode()
            word_id = self._word_ids.get(piece)
            tokens.extend([word_id] if word_id is not None else [self.FIRST_BYTE + b for b in piece])
        return tokens

    def piece(self, token: int) -> bytes:
        return self._pieces[token]

    def is_eog(self, token: int) -> bool:
        return token == self.EOS

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        """A real llama.cpp vocabulary of these pieces (engine/fake_vocab.py), loaded on first use."""
        return fake_vocab(self._pieces)

    def decode(self, batch: Batch) -> np.ndarray:
        self._check(batch)
        if self.used_cells + len(batch) > self.n_ctx:
            raise KvCacheFull(f"{len(batch)} tokens do not fit in {self.n_ctx - self.used_cells} free cells")
        rows = []
        for token, pos, seq, out in zip(batch.tokens, batch.positions, batch.seq_ids, batch.outputs, strict=True):
            self._append(seq, pos, token)
            if out:
                rows.append(self._logits([t for _, t in self._seqs[seq]]))
        self.decode_calls += 1
        self.decoded_tokens += len(batch)
        return np.array(rows, dtype=np.float32).reshape(len(rows), self.info.n_vocab)

    def remove(self, seq_id: int, start: int = 0) -> None:
        cells = self._seqs.get(seq_id, [])
        for cell, _ in cells[start:]:
            self._unref(cell)
        if start == 0:
            self._seqs.pop(seq_id, None)
        else:
            del cells[start:]

    def copy(self, src: int, dst: int, length: int) -> None:
        assert not self._seqs.get(dst), "copy into a non-empty sequence"
        shared = self._seqs[src][:length]
        assert len(shared) == length, f"seq {src} holds {len(self._seqs[src])} positions, asked for {length}"
        for cell, _ in shared:
            self._refs[cell] += 1
        self._seqs[dst] = list(shared)

    def save(self, seq_id: int, start: int = 0) -> SeqState:
        held = self._seqs.get(seq_id, [])
        assert 0 <= start <= len(held), f"seq {seq_id} holds {len(held)} positions, asked to save from {start}"
        rows = np.zeros((len(held) - start, self._state_words), dtype=np.int32)
        rows[:, 0] = [t for _, t in held[start:]]
        rows[:, 1] = np.arange(start, len(held))  # the positions, as llama.cpp's state carries them
        self.saves += 1
        return rows.tobytes()

    def restore(self, seq_id: int, state: SeqState) -> bool:
        assert 0 <= seq_id < self.n_seq_max, f"seq id {seq_id} out of range"
        rows = np.frombuffer(state, dtype=np.int32).reshape(-1, self._state_words)
        tokens, first = rows[:, 0].tolist(), int(rows[0, 1]) if len(rows) else 0
        if not first:
            self.remove(seq_id)  # llama.cpp empties the destination first, whatever happens next
        held = len(self._seqs.get(seq_id, []))
        assert held == first, f"seq {seq_id} holds {held} positions; a state saved from {first} goes after them"
        if len(tokens) > self.n_ctx - self.used_cells:
            return False
        for pos, token in enumerate(tokens, first):
            self._append(seq_id, pos, token)
        self.restores += 1
        return True

    def clear(self) -> None:
        self._seqs.clear()
        self._refs.clear()

    def close(self) -> None:
        self.clear()

    def tokens_of(self, seq_id: int) -> list[int]:
        return [t for _, t in self._seqs.get(seq_id, [])]

    def _check(self, batch: Batch) -> None:
        expected: dict[int, int] = {}
        for pos, seq in zip(batch.positions, batch.seq_ids, strict=True):
            assert 0 <= seq < self.n_seq_max, f"seq id {seq} out of range"
            want = expected.get(seq, len(self._seqs.get(seq, [])))
            assert pos == want, f"seq {seq}: position {pos} but memory holds {want}"
            expected[seq] = pos + 1
        assert len(batch) <= self.n_batch, f"batch of {len(batch)} > n_batch {self.n_batch}"

    def _append(self, seq: int, pos: int, token: int) -> None:
        self._seqs.setdefault(seq, []).append((self._next_cell, token))
        self._refs[self._next_cell] = 1
        self._next_cell += 1

    def _unref(self, cell: int) -> None:
        self._refs[cell] -= 1
        if self._refs[cell] == 0:
            del self._refs[cell]

    def _logits(self, history: list[int]) -> np.ndarray:
        digest = hashlib.blake2b(np.asarray(history, dtype=np.int32).tobytes(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        logits = rng.normal(0.0, 3.0, self.info.n_vocab).astype(np.float32)
        logits[: self.FIRST_BYTE] = -10.0
        if self._eos_every and len(history) % self._eos_every == 0:
            logits[self.EOS] = 100.0
        if len(history) in self._script:
            logits[self._script[len(history)]] = 100.0
        return logits
