"""How one engine step is cut into forward passes (llama_decode calls) so that llama.cpp's CPU attention stays cheap.

llama.cpp's flash attention on the CPU (ggml-cpu `flash_attn_ext`, F16/F32 KV) has two paths. A pass of fewer
than 64 tokens works row by row: each row skips every cell its mask hides. A pass of 64 tokens or more works in
tiles of 64 rows x 64 cells and skips a tile only when none of its rows may see any of its cells. Rows of a prompt
chunk see one history, so their tiles skip most of the cache; but a decode row (one token of a running sequence)
shares its tile with other sequences' rows, and that tile then pays for every cell any of them sees. With eight
chats decoding beside a prompt the tile visits nearly every cell in use, once per head and per layer.

So when a step would take the tiled path, the rows of sequences that bring only a few tokens (decode rows) go in
passes of their own of at most 63 rows, which take the row-by-row path, and the prompt chunks go in one pass. Each
extra pass reads the weights once more, which costs less than the tiles it saves: `benchmarks/passes.py` measures
both sides.
"""

from __future__ import annotations

from collections.abc import Sequence

TILE_ROWS = 64  # ggml-cpu's GGML_FA_TILE_Q: a pass this long takes the tiled path
FEW_ROWS = 8  # a sequence with fewer rows than this in a step shares a tile with many others


def runs(seq_ids: Sequence[int]) -> list[range]:
    """The batch rows of each sequence, in batch order (a sequence's rows are consecutive)."""
    found: list[range] = []
    start = 0
    for row in range(1, len(seq_ids) + 1):
        if row == len(seq_ids) or seq_ids[row] != seq_ids[start]:
            found.append(range(start, row))
            start = row
    return found


def plan_passes(seq_ids: Sequence[int], tiled: bool) -> list[list[int]]:
    """The batch rows of each forward pass, in the order to run them. One pass holding every row when the
    attention has no tiled path (flash attention off, quantized KV) or the step is shorter than a tile."""
    everything = [list(range(len(seq_ids)))]
    if not tiled or len(seq_ids) < TILE_ROWS:
        return everything
    few: list[range] = []
    many: list[int] = []
    for rows in runs(seq_ids):
        if len(rows) < FEW_ROWS:
            few.append(rows)
        else:
            many.extend(rows)
    if not few:
        return everything
    passes: list[list[int]] = [[]]
    for rows in few:  # whole runs, so a sequence's tokens stay in one pass
        if len(passes[-1]) + len(rows) >= TILE_ROWS:
            passes.append([])
        passes[-1].extend(rows)
    return passes + ([many] if many else [])


def plan_adapter_passes(seq_ids: Sequence[int], adapters: Sequence[str], tiled: bool,
                        first: str = "") -> list[tuple[str, list[int]]]:
    """The passes of a step whose sequences run under different LoRA adapters: llama.cpp applies adapters to a
    whole context, so each adapter's rows ("" the base model) get passes of their own, cut as `plan_passes` cuts
    a step. Adapter `first` (the one the context is set to) goes first, the rest in order of first appearance:
    each switch costs llama.cpp a new graph plan. `adapters` empty: every row is the base model's."""
    if not adapters or all(a == adapters[0] for a in adapters):
        return [(adapters[0] if adapters else "", rows) for rows in plan_passes(seq_ids, tiled)]
    groups: dict[str, list[int]] = {first: []} if first in adapters else {}
    for row, adapter in enumerate(adapters):
        groups.setdefault(adapter, []).append(row)
    planned: list[tuple[str, list[int]]] = []
    for adapter, rows in groups.items():
        for part in plan_passes([seq_ids[r] for r in rows], tiled):
            planned.append((adapter, [rows[i] for i in part]))
    return planned
