"""Synthetic llama-architecture GGUF models with random weights.

Tests, benchmarks and the demo need real GGUF files, and nothing can be downloaded
here, so this module writes them: the llama tensor layout, a SentencePiece-style
vocabulary in which common English words are single tokens, a ChatML template, and
seeded random weights scaled so that greedy decoding is varied and rarely decided
by a near-tie (batched and unbatched decoding are compared token for token).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFWriter, LlamaFileType, PoolingType
from gguf.constants import GGML_QUANT_SIZES, GGML_QUANT_VERSION
from gguf.quants import quantize

from pier.synthetic.vocab import BOS, CHATML_TEMPLATE, EOS, IM_END, UNK, Vocab, build_vocab, fixed_token_count
from pier.synthetic.words import WORDS


@dataclass(frozen=True)
class ModelShape:
    """Hyper-parameters of a llama-architecture model."""

    n_vocab: int
    n_embd: int
    n_layer: int
    n_ff: int
    n_head: int
    n_head_kv: int
    n_ctx_train: int = 4096
    rope_freq_base: float = 10000.0
    rms_norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_embd_kv(self) -> int:
        # Width of the K and V projections: grouped-query attention shares each
        # K/V head between n_head // n_head_kv query heads.
        return self.head_dim * self.n_head_kv


# Loads and decodes in milliseconds; the vocabulary still holds ~680 whole words.
TINY = ModelShape(n_vocab=2048, n_embd=64, n_layer=2, n_ff=128, n_head=4, n_head_kv=2)
# About 27M parameters: big enough that batching and threading matter, small enough
# for end-to-end tests on two cores.
SMALL = ModelShape(n_vocab=8000, n_embd=512, n_layer=6, n_ff=1536, n_head=8, n_head_kv=4)
# The shape of the 360M-class models (SmolLM-360M) that benchmarks are quoted for.
BENCH_360M = ModelShape(n_vocab=32000, n_embd=960, n_layer=32, n_ff=2560, n_head=15, n_head_kv=5)
# The shape of a 7B model with grouped-query attention (Mistral 7B), for GPU benchmarks: 4 GB at Q4_0.
BENCH_7B = ModelShape(n_vocab=32000, n_embd=4096, n_layer=32, n_ff=14336, n_head=32, n_head_kv=8)

_QUANTS: dict[str, tuple[GGMLQuantizationType, LlamaFileType]] = {
    "Q4_0": (GGMLQuantizationType.Q4_0, LlamaFileType.MOSTLY_Q4_0),
    "Q8_0": (GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
    "F16": (GGMLQuantizationType.F16, LlamaFileType.MOSTLY_F16),
    "F32": (GGMLQuantizationType.F32, LlamaFileType.ALL_F32),
}
QUANTS: tuple[str, ...] = tuple(_QUANTS)

# --- weight scales -----------------------------------------------------------------
# Every matrix input is RMS-normalised (or is the output of one that was), so a
# weight std of gain / sqrt(n_in) gives outputs with std ~ gain.
_EMBD_STD = 1.0
# Attention scores then have std ~ _QK_GAIN**2: sharp enough that each position
# attends to a few context tokens, so the output depends on the context (a model that
# ignored it would hide KV-cache mix-ups between sequences).
_QK_GAIN = 1.5
# Block outputs (attn_output, ffn_down) are damped by sqrt(n_layer) so the residual
# stream stays a mix of the current token and its context even in deep models.
_BLOCK_GAIN = 1.0
# Standard deviation of the next-token logits: a few units, so greedy decoding is not
# dominated by near-ties between the top two candidates.
_LOGIT_STD = 4.0
# Output rows of everything but whole words and a little punctuation are scaled
# down, so their logits stay near zero and greedy decoding never picks them: output
# reads as words, is valid UTF-8, never stops early at EOS (a test that wants EOS can
# force it with a logit bias), and counts one token per word.
_NON_WORD_LOGIT_GAIN = 0.1
_OUTPUT_PUNCTUATION = ".,!?"

# Rows are drawn and quantized in chunks of about this many values: small enough for
# the cache and for parallel work, and a fixed size so the bytes never depend on
# the number of threads.
_CHUNK_VALUES = 1 << 20


def build_gguf(
    path: str | Path,
    shape: ModelShape = TINY,
    quant: str = "Q8_0",
    seed: int = 0,
    name: str = "pier-synthetic",
    pooling: str | None = None,
    words: Sequence[str] = WORDS,
) -> Path:
    """Write a llama GGUF with random weights to `path`; same arguments, same bytes.

    `pooling` ("mean", "cls" or "last") makes it an embedding model: llama.cpp pools its last hidden states that
    way (`llama.pooling_type`); mean and cls pooling also see the whole input (non-causal attention), as BERT-like
    embedding models do, while last pooling keeps causal attention, as decoder embedding models do. `words`: the
    real words the vocabulary holds whole (build_vocab)."""
    pooling_type = _check_pooling(pooling)
    qtype, file_type = _check_quant(quant)
    _check_shape(shape, qtype)
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    out = Path(path)
    vocab = build_vocab(shape.n_vocab, words)
    plan = _tensor_plan(shape, _output_row_gains(vocab))
    writer = GGUFWriter(out, "llama")
    try:
        _add_model_metadata(writer, shape, file_type, name)
        if pooling_type is not None:
            writer.add_pooling_type(pooling_type)
            writer.add_causal_attention(pooling_type is PoolingType.LAST)
        _add_vocab_metadata(writer, vocab)
        for spec in plan:
            _add_tensor_info(writer, spec, qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for data in _encoded_tensors(plan, qtype, seed):
            writer.write_tensor_data(data)
    finally:
        writer.close()
    return out


def n_params(shape: ModelShape) -> int:
    """Number of weights in a model of this shape (norm weights included)."""
    return sum(math.prod(spec.shape) for spec in _tensor_plan(shape))


def describe(path: str | Path) -> dict[str, Any]:
    """Read back what a GGUF declares: architecture, shape, quant, size."""
    p = Path(path)
    reader = GGUFReader(p)
    arch = str(_field(reader, "general.architecture"))

    def hparam(key: str) -> Any:
        return _field(reader, f"{arch}.{key}")

    tokens = reader.fields["tokenizer.ggml.tokens"]
    shape = ModelShape(
        n_vocab=len(tokens.data),
        n_embd=int(hparam("embedding_length")),
        n_layer=int(hparam("block_count")),
        n_ff=int(hparam("feed_forward_length")),
        n_head=int(hparam("attention.head_count")),
        n_head_kv=int(hparam("attention.head_count_kv")),
        n_ctx_train=int(hparam("context_length")),
        rope_freq_base=_from_f32(hparam("rope.freq_base")),
        rms_norm_eps=_from_f32(hparam("attention.layer_norm_rms_epsilon")),
    )
    file_type = LlamaFileType(int(_field(reader, "general.file_type")))
    quants = {ft: q for q, (_, ft) in _QUANTS.items()}
    return {
        "architecture": arch,
        "name": str(_field(reader, "general.name")),
        "quant": quants.get(file_type, file_type.name),
        "shape": dataclasses.asdict(shape),
        "n_params": sum(int(t.n_elements) for t in reader.tensors),
        "file_size": p.stat().st_size,
    }


def _from_f32(value: float) -> float:
    # GGUF stores these as float32: 1e-5 reads back as 9.999999747e-06.
    return float(f"{value:.7g}")


def _field(reader: GGUFReader, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        raise KeyError(f"GGUF metadata key {key!r} is missing")
    return field.contents()


# --- validation ----------------------------------------------------------------------


POOLINGS = {"mean": PoolingType.MEAN, "cls": PoolingType.CLS, "last": PoolingType.LAST}


def _check_pooling(pooling: str | None) -> PoolingType | None:
    if pooling is None:
        return None
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)} (or None for a generation model), got "
                         f"{pooling!r}")
    return POOLINGS[pooling]


def _check_quant(quant: str) -> tuple[GGMLQuantizationType, LlamaFileType]:
    if quant not in _QUANTS:
        raise ValueError(f"unsupported quant {quant!r}; allowed values: {', '.join(QUANTS)}")
    return _QUANTS[quant]


def _check_shape(shape: ModelShape, qtype: GGMLQuantizationType) -> None:
    for name in ("n_vocab", "n_embd", "n_layer", "n_ff", "n_head", "n_head_kv", "n_ctx_train"):
        if getattr(shape, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(shape, name)}")
    if shape.n_embd % shape.n_head:
        raise ValueError(
            f"n_embd ({shape.n_embd}) must be divisible by n_head ({shape.n_head}); "
            f"pick n_head from the divisors of n_embd, e.g. {_divisors_near(shape.n_embd, shape.n_head)}"
        )
    if shape.n_head % shape.n_head_kv:
        raise ValueError(
            f"n_head ({shape.n_head}) must be divisible by n_head_kv ({shape.n_head_kv}); "
            f"pick n_head_kv from {_divisors_near(shape.n_head, shape.n_head_kv)}"
        )
    if shape.head_dim % 2:
        raise ValueError(
            f"head dimension n_embd / n_head = {shape.head_dim} must be even, as RoPE rotates pairs; "
            "change n_embd or n_head"
        )
    _check_row_sizes(shape, qtype)
    minimum = fixed_token_count()
    if shape.n_vocab < minimum:
        raise ValueError(
            f"n_vocab ({shape.n_vocab}) is too small: special, byte and character tokens "
            f"alone take {minimum}; use n_vocab >= {minimum} (a few thousand to have words)"
        )


def _check_row_sizes(shape: ModelShape, qtype: GGMLQuantizationType) -> None:
    # Quantized rows are packed in blocks (32 values for Q4_0 and Q8_0), so every
    # matrix's input width must be a multiple of the block size.
    block = GGML_QUANT_SIZES[qtype][0]
    for name in ("n_embd", "n_ff"):
        value = getattr(shape, name)
        if value % block:
            lower, upper = value // block * block, (value // block + 1) * block
            suggestion = f"{lower} or {upper}" if lower else f"{upper}"
            raise ValueError(
                f"{name} ({value}) must be a multiple of {block} for {qtype.name}, whose rows "
                f"are packed in blocks of {block}; use {suggestion}, or quant F16/F32"
            )


def _divisors_near(n: int, target: int) -> str:
    """The (up to) three divisors of n closest to target, as "2, 4 or 8"."""
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    near = sorted(sorted(divisors, key=lambda d: (abs(d - target), d))[:3])
    return " or ".join([", ".join(map(str, near[:-1])), str(near[-1])]) if len(near) > 1 else str(near[0])


# --- metadata ------------------------------------------------------------------------


def _add_model_metadata(writer: GGUFWriter, shape: ModelShape, file_type: LlamaFileType, name: str) -> None:
    writer.add_name(name)
    writer.add_context_length(shape.n_ctx_train)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_layer_norm_rms_eps(shape.rms_norm_eps)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_freq_base)
    writer.add_vocab_size(shape.n_vocab)
    writer.add_file_type(int(file_type))
    writer.add_quantization_version(GGML_QUANT_VERSION)


def _add_vocab_metadata(writer: GGUFWriter, vocab: Vocab) -> None:
    writer.add_tokenizer_model("llama")
    writer.add_token_list(vocab.tokens)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_unk_token_id(vocab.id_of(UNK))
    writer.add_bos_token_id(vocab.id_of(BOS))
    writer.add_eos_token_id(vocab.id_of(EOS))
    # llama.cpp stops generation at EOT as well as EOS: chat turns end with <|im_end|>.
    writer.add_eot_token_id(vocab.id_of(IM_END))
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    writer.add_chat_template(CHATML_TEMPLATE)


# --- tensors --------------------------------------------------------------------------


@dataclass(frozen=True)
class _TensorSpec:
    name: str
    shape: tuple[int, ...]  # numpy order: (out, in) for matrices
    std: float | None  # None: a norm weight, all ones and kept in F32
    # Per-row scale applied on top of std (the output matrix favours whole words).
    row_gains: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def is_norm(self) -> bool:
        return self.std is None


def _tensor_plan(shape: ModelShape, output_gains: np.ndarray | None = None) -> list[_TensorSpec]:
    e, kv, ff = shape.n_embd, shape.n_embd_kv, shape.n_ff
    per_in, per_ff = 1.0 / math.sqrt(e), 1.0 / math.sqrt(ff)
    block = _BLOCK_GAIN / math.sqrt(shape.n_layer)
    plan = [_TensorSpec("token_embd.weight", (shape.n_vocab, e), _EMBD_STD)]
    for i in range(shape.n_layer):
        p = f"blk.{i}."
        plan += [
            _TensorSpec(p + "attn_norm.weight", (e,), None),
            _TensorSpec(p + "attn_q.weight", (e, e), _QK_GAIN * per_in),
            _TensorSpec(p + "attn_k.weight", (kv, e), _QK_GAIN * per_in),
            _TensorSpec(p + "attn_v.weight", (kv, e), per_in),
            _TensorSpec(p + "attn_output.weight", (e, e), block * per_in),
            _TensorSpec(p + "ffn_norm.weight", (e,), None),
            _TensorSpec(p + "ffn_gate.weight", (ff, e), per_in),
            _TensorSpec(p + "ffn_up.weight", (ff, e), per_in),
            _TensorSpec(p + "ffn_down.weight", (e, ff), block * per_ff),
        ]
    plan += [
        _TensorSpec("output_norm.weight", (e,), None),
        _TensorSpec("output.weight", (shape.n_vocab, e), _LOGIT_STD * per_in, output_gains),
    ]
    return plan


def _output_row_gains(vocab: Vocab) -> np.ndarray:
    keep = vocab.words | set(_OUTPUT_PUNCTUATION)
    gains = [1.0 if token in keep else _NON_WORD_LOGIT_GAIN for token in vocab.tokens]
    return np.array(gains, dtype=np.float32)


def _stored_type(spec: _TensorSpec, qtype: GGMLQuantizationType) -> GGMLQuantizationType:
    return GGMLQuantizationType.F32 if spec.is_norm else qtype


def _add_tensor_info(writer: GGUFWriter, spec: _TensorSpec, qtype: GGMLQuantizationType) -> None:
    # Declared up front (as add_tensor(name, q, raw_shape=q.shape, raw_dtype=qtype)
    # would) so the data can then be streamed: holding a whole F32 360M model in
    # memory is 1.5 GB.  The shape is in elements; a non-uint8 nominal dtype tells the
    # writer so, and write_tensor_data checks the byte count against nbytes.
    stored = _stored_type(spec, qtype)
    block, type_size = GGML_QUANT_SIZES[stored]
    nbytes = math.prod(spec.shape) // block * type_size
    writer.add_tensor_info(spec.name, spec.shape, np.dtype(np.float32), nbytes, raw_dtype=stored)


def _row_chunks(spec: _TensorSpec) -> list[tuple[int, int]]:
    rows = spec.shape[0]
    if spec.is_norm:
        return [(0, rows)]
    step = max(1, _CHUNK_VALUES // spec.shape[1])
    return [(start, min(start + step, rows)) for start in range(0, rows, step)]


def _encode_chunk(
    spec: _TensorSpec, qtype: GGMLQuantizationType, seed: int, key: tuple[int, int], rows: tuple[int, int]
) -> np.ndarray:
    if spec.std is None:
        return np.ones(spec.shape, dtype=np.float32)
    # One generator per chunk, seeded by (seed, tensor, chunk): results do not depend
    # on how chunks are scheduled over threads.
    rng = np.random.default_rng([seed, *key])
    # Uniform values are about twice as cheap to draw as normal ones, and the matmuls
    # sum hundreds of them, so activations come out near-normal anyway.
    half_width = np.float32(spec.std * math.sqrt(3.0))
    values = rng.random((rows[1] - rows[0], spec.shape[1]), dtype=np.float32)
    values *= 2 * half_width
    values -= half_width
    if spec.row_gains is not None:
        values *= spec.row_gains[rows[0] : rows[1], None]
    return quantize(values, qtype)


def _encoded_tensors(plan: list[_TensorSpec], qtype: GGMLQuantizationType, seed: int) -> Iterator[np.ndarray]:
    """Encoded tensors in plan order, computed a few chunks ahead on worker threads.

    numpy releases the GIL in the RNG and in the array maths of quantization, so
    threads give real parallelism; the bounded look-ahead caps memory.
    """
    workers = max(1, min(8, os.cpu_count() or 1))
    jobs = ((t, spec, k, rows) for t, spec in enumerate(plan) for k, rows in enumerate(_row_chunks(spec)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = _bounded_submit(pool, jobs, qtype, seed, lookahead=2 * workers)
        for t, spec in enumerate(plan):
            parts = []
            for _ in _row_chunks(spec):
                owner, future = next(futures)
                assert owner == t, "chunks must come back in plan order"
                parts.append(future.result())
            yield parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def _bounded_submit(
    pool: ThreadPoolExecutor,
    jobs: Iterable[tuple[int, _TensorSpec, int, tuple[int, int]]],
    qtype: GGMLQuantizationType,
    seed: int,
    lookahead: int,
) -> Iterator[tuple[int, Future[np.ndarray]]]:
    pending: deque[tuple[int, Future[np.ndarray]]] = deque()
    for t, spec, k, rows in jobs:
        pending.append((t, pool.submit(_encode_chunk, spec, _stored_type(spec, qtype), seed, (t, k), rows)))
        if len(pending) > lookahead:
            yield pending.popleft()
    yield from pending
