"""Which tokens a grammar-constrained sequence may not sample, so that the text llama.cpp's grammar reads is the
text the client gets.

Two places differ. Control tokens: the grammar reads their text (`<pad>`), the output writes nothing. Invalid
UTF-8: the grammar decodes bytes leniently (it takes a lead byte over U+10FFFF, an overlong form, a surrogate),
while the text stream writes U+FFFD, which can break a `maxLength` or a regex. So control tokens and pieces with
bytes that never occur in UTF-8 (C0, C1, F5-FF) are always refused, and after a lead byte whose second byte is
restricted (E0, ED, F0, F4) the byte tokens outside that range are. Byte tokens stay usable otherwise, so
characters the vocabulary only spells in bytes (byte fallback) are still written.
"""

from __future__ import annotations

import numpy as np

from pier.engine.runner import ModelRunner

_NEVER = frozenset({0xC0, 0xC1, *range(0xF5, 0x100)})
# The second byte allowed after these leads (RFC 3629): no overlongs, no surrogates, nothing over U+10FFFF.
_SECOND = {0xE0: range(0xA0, 0xC0), 0xED: range(0x80, 0xA0), 0xF0: range(0x90, 0xC0), 0xF4: range(0x80, 0x90)}


class Utf8Guard:
    def __init__(self, runner: ModelRunner) -> None:
        always, bytes_at = [], {}
        for token in range(runner.info.n_vocab):
            piece = runner.piece(token)
            if runner.is_eog(token):
                continue
            if not piece or _NEVER.intersection(piece):
                always.append(token)
            elif len(piece) == 1 and piece[0] >= 0x80:
                bytes_at[piece[0]] = token
        self._always = np.array(always, dtype=np.int64)
        self._after = {lead: self._outside(allowed, bytes_at) for lead, allowed in _SECOND.items()}

    def _outside(self, allowed: range, bytes_at: dict[int, int]) -> np.ndarray:
        refused = [token for byte, token in bytes_at.items() if 0x80 <= byte < 0xC0 and byte not in allowed]
        return np.array([*self._always, *refused], dtype=np.int64)

    def refused(self, pending: bytes) -> np.ndarray:
        """Token ids to rule out, given the bytes of an unfinished character already written."""
        if len(pending) == 1 and pending[0] in self._after:
            return self._after[pending[0]]
        return self._always
