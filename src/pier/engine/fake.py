"""A deterministic stand-in for llama.cpp, so engine and server tests run in milliseconds without a model.

It keeps a real model of a unified KV cache (cells shared between sequences by `copy`, freed when no
sequence holds them, a fixed number of them) and checks positions like llama.cpp does. Its logits are a
pure function of the *whole* token history of a sequence, so a cache bug that corrupts or mixes up a
sequence's KV changes the output, as it would with a real model. Saving a sequence's state and restoring it
follow the runner's contract (runner.py): the saved bytes carry the tokens and their positions (standing in for
their K and V rows, `state_bytes_per_token` each); a state saved from position 0 empties the destination first,
one saved from further on goes after the prefix the destination holds, and a restore fails when fewer cells are
free than the state holds.

With a `window`, it keeps a sliding-window model's memory as llama.cpp's iSWA cache does, at its most forgetful:
after each decode, a position every later token of its sequence would mask (and that no other sequence holds) is
dropped from the window layers, with everything of that sequence below it; a saved state leaves masked positions
out; a decode whose first position for a sequence is not one past the last one the window layers hold fails as
llama_decode does (status -1); and logits depend on which positions of the token's window are missing, so a
prefix reused without its window changes the output, as it does with a real model. `fail_decodes` makes decodes
that carry a chosen token fail (a sequence that breaks llama_decode).
"""

from __future__ import annotations

import hashlib

import llama_cpp
import numpy as np

from pier.engine.fake_vocab import fake_vocab
from pier.engine.model_memory import NOTHING, HeldPositions, ModelMemory
from pier.engine.runner import Batch, KvCacheFull, ModelInfo, SeqState

WORDS = ["hello", "world", "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "é", "中", "€"]


class FakeRunner:
    """Vocabulary: 0 <unk>, 1 <s>, 2 </s>, then the 256 bytes, then whole words (with a leading space)."""

    BOS, EOS, FIRST_BYTE = 1, 2, 3

    def __init__(
        self, n_ctx: int = 512, n_seq_max: int = 16, n_batch: int = 64, eos_every: int = 0,
        script: dict[int, int] | None = None, state_bytes_per_token: int = 64, window: int = 0,
    ) -> None:
        self.n_ctx, self.n_seq_max, self.n_batch = n_ctx, n_seq_max, n_batch
        self.memory = ModelMemory(window=window)
        # int32s per saved token: the token, its position, whether the window layers hold it, zeros
        self._state_words = max(3, state_bytes_per_token // 4)
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
        self._window: dict[int, set[int]] = {}  # with a window: seq id -> the positions the window layers hold
        self._failing: dict[int, int] = {}  # token -> how many more decodes carrying it fail
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

    def fail_decodes(self, token: int, times: int = 1_000_000) -> None:
        """The next `times` decodes whose batch carries `token` fail as llama_decode does (nothing written)."""
        self._failing[token] = times

    def decode(self, batch: Batch) -> np.ndarray:
        self._check(batch)
        self._check_window(batch)
        for token in set(batch.tokens) & self._failing.keys():
            self._failing[token] -= 1
            if not self._failing[token]:
                del self._failing[token]
            raise RuntimeError(f"llama_decode failed with status -1 on a batch of {len(batch)} tokens")
        if self.used_cells + len(batch) > self.n_ctx:
            raise KvCacheFull(f"{len(batch)} tokens do not fit in {self.n_ctx - self.used_cells} free cells")
        rows = []
        for token, pos, seq, out in zip(batch.tokens, batch.positions, batch.seq_ids, batch.outputs, strict=True):
            self._append(seq, pos, token)
            if out:
                rows.append(self._logits([t for _, t in self._seqs[seq]], self._missing(seq, pos)))
        self._forget_masked()
        self.decode_calls += 1
        self.decoded_tokens += len(batch)
        return np.array(rows, dtype=np.float32).reshape(len(rows), self.info.n_vocab)

    def held(self, seq_id: int) -> HeldPositions:
        if self.memory.window > 0:
            window = self._window.get(seq_id)
            return HeldPositions(min(window), max(window)) if window else NOTHING
        held = len(self._seqs.get(seq_id, []))
        return HeldPositions(0, held - 1) if held else NOTHING

    def remove(self, seq_id: int, start: int = 0) -> None:
        cells = self._seqs.get(seq_id, [])
        for cell, _ in cells[start:]:
            self._unref(cell)
        if start == 0:
            self._seqs.pop(seq_id, None)
            self._window.pop(seq_id, None)
        else:
            del cells[start:]
            if seq_id in self._window:
                self._window[seq_id] = {p for p in self._window[seq_id] if p < start}

    def copy(self, src: int, dst: int, length: int) -> None:
        assert not self._seqs.get(dst), "copy into a non-empty sequence"
        shared = self._seqs[src][:length]
        assert len(shared) == length, f"seq {src} holds {len(self._seqs[src])} positions, asked for {length}"
        for cell, _ in shared:
            self._refs[cell] += 1
        self._seqs[dst] = list(shared)
        if self.memory.window > 0:
            self._window[dst] = {p for p in self._window.get(src, ()) if p < length}

    def save(self, seq_id: int, start: int = 0) -> SeqState:
        held = self._seqs.get(seq_id, [])
        assert 0 <= start <= len(held), f"seq {seq_id} holds {len(held)} positions, asked to save from {start}"
        rows = np.zeros((len(held) - start, self._state_words), dtype=np.int32)
        rows[:, 0] = [t for _, t in held[start:]]
        rows[:, 1] = np.arange(start, len(held))  # the positions, as llama.cpp's state carries them
        window = self._window.get(seq_id, set())
        if self.memory.window > 0:  # llama.cpp saves no window cell the sequence's next token would mask
            rows[:, 2] = [p in window and p >= len(held) - self.memory.window for p in range(start, len(held))]
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
        for pos, (token, in_window) in enumerate(zip(tokens, rows[:, 2].tolist(), strict=True), first):
            self._append(seq_id, pos, token)
            if not in_window and self.memory.window > 0:
                self._window[seq_id].discard(pos)
        self.restores += 1
        return True

    def clear(self) -> None:
        self._seqs.clear()
        self._window.clear()
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

    def _check_window(self, batch: Batch) -> None:
        """llama.cpp checks a batch against the last position the window layers hold (iSWA's seq_pos_max)."""
        if self.memory.window <= 0:
            return
        first: dict[int, int] = {}
        for pos, seq in zip(batch.positions, batch.seq_ids, strict=True):
            first.setdefault(seq, pos)
        for seq, pos in first.items():
            window = self._window.get(seq)
            if window and pos != max(window) + 1:
                raise RuntimeError(f"llama_decode failed with status -1 on a batch of {len(batch)} tokens "
                                   f"(sequence {seq} goes on at {pos}, its window layers hold up to {max(window)})")

    def _append(self, seq: int, pos: int, token: int) -> None:
        self._seqs.setdefault(seq, []).append((self._next_cell, token))
        self._refs[self._next_cell] = 1
        self._next_cell += 1
        if self.memory.window > 0:
            self._window.setdefault(seq, set()).add(pos)

    def _missing(self, seq: int, pos: int) -> tuple[int, ...]:
        """Positions of the window of the token at `pos` that the window layers no longer hold."""
        if self.memory.window <= 0:
            return ()
        window = self._window.get(seq, set())
        return tuple(p for p in range(max(0, pos - self.memory.window + 1), pos) if p not in window)

    def _forget_masked(self) -> None:
        """Drop, from each sequence, every window position its next token masks and no other sequence holds, and
        (llama.cpp keeps each sequence's positions in one run) everything of that sequence below it."""
        if self.memory.window <= 0:
            return
        for seq, window in self._window.items():
            if not window:
                continue
            masked_below = max(window) + 1 - self.memory.window  # the next token sees positions >= this + 1
            cells = self._seqs.get(seq, [])
            alone = [p for p in window if p <= masked_below and p < len(cells) and self._refs[cells[p][0]] == 1]
            if alone:
                cut = max(alone)
                self._window[seq] = {p for p in window if p > cut}

    def _unref(self, cell: int) -> None:
        self._refs[cell] -= 1
        if self._refs[cell] == 0:
            del self._refs[cell]

    def _logits(self, history: list[int], missing: tuple[int, ...] = ()) -> np.ndarray:
        seen = np.asarray(history, dtype=np.int32).copy()
        seen[list(missing)] = -1  # a window position the memory lost: the model computes from something else
        digest = hashlib.blake2b(seen.tobytes(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        logits = rng.normal(0.0, 3.0, self.info.n_vocab).astype(np.float32)
        logits[: self.FIRST_BYTE] = -10.0
        if self._eos_every and len(history) % self._eos_every == 0:
            logits[self.EOS] = 100.0
        if len(history) in self._script:
            logits[self._script[len(history)]] = 100.0
        return logits
