"""The llama.cpp runner: a GGUF loaded through llama-cpp-python's low-level API, one unified KV cache."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import numpy as np

from pier.engine import llama_log
from pier.engine.amx_permission import refuse_amx
from pier.engine.cpus import engine_threads, usable_cores
from pier.engine.devices import Device, device_handles
from pier.engine.kernels import HostKernels, KernelFamily
from pier.engine.loaded_adapters import LoadedAdapters
from pier.engine.model_memory import NOTHING, HeldPositions, ModelMemory
from pier.engine.offload import ON_CPU, SPLIT_MODES, Offload
from pier.engine.passes import plan_adapter_passes, runs
from pier.engine.runner import LLAMA_MAX_SEQ, Batch, KvCacheFull, ModelInfo, SeqState

_backend_lock = threading.Lock()
_backend_ready = False
# Whether models load with llama.cpp's extra buffer types (repacked weights: the AMX and repack kernel families);
# False once this process chose the plain family (pier.server.kernel_choice).
_extra_buffers = True


def _init_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_log.install()
            llama_cpp.llama_backend_init()
            _backend_ready = True


Column = Sequence[int] | Sequence[bool] | np.ndarray  # one field of a batch's rows, as a list or numpy array

KV_TYPES = {"f32": llama_cpp.GGML_TYPE_F32, "f16": llama_cpp.GGML_TYPE_F16, "q8_0": llama_cpp.GGML_TYPE_Q8_0,
            "q4_0": llama_cpp.GGML_TYPE_Q4_0}


def _uint8_view(buffer: bytearray) -> ctypes.Array[ctypes.c_uint8]:
    return (ctypes.c_uint8 * len(buffer)).from_buffer(buffer)


def _kv_ggml_type(name: str) -> int:
    if name not in KV_TYPES:
        raise ValueError(f"Unknown KV cache type {name!r}: use one of {', '.join(KV_TYPES)}.")
    return KV_TYPES[name]


def use_family(family: KernelFamily, host: HostKernels) -> None:
    """Every later load in this process computes with `family` (before the first load: AMX is refused for good)."""
    global _extra_buffers
    _extra_buffers = family is not KernelFamily.PLAIN
    if family is KernelFamily.REPACK and host.amx:
        refuse_amx()


def system_info() -> str:
    """llama.cpp's own line of what this build computes with ("CPU : SSE3 = 1 | AVX2 = 1 | ... | REPACK = 1 |")."""
    return bytes(llama_cpp.llama_print_system_info()).decode("utf-8", "replace").strip()


def load_model(path: Path, offload: Offload = ON_CPU, extra_buffers: bool | None = None) -> llama_cpp.llama_model_p:
    """A GGUF loaded by llama.cpp (memory-mapped: copies of the same GGUF share its pages), its layers on the
    offload's GPUs or, with none, on the CPU alone; with repacked weights unless this process chose the plain
    kernels (`use_family`) or `extra_buffers` says otherwise."""
    if not path.is_file():
        raise FileNotFoundError(f"No GGUF file at {path}: pass the path of a .gguf model file.")
    _init_backend()
    params = llama_cpp.llama_model_default_params()
    params.use_mmap = True
    params.use_extra_bufts = _extra_buffers if extra_buffers is None else extra_buffers
    keep = _place(params, offload)  # the array params points into, alive until the load is done
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    del keep
    if not model:
        where = "its GPUs" if offload.on_gpu else "memory"
        raise ValueError(f"llama.cpp could not load {path} into {where}: is it a valid GGUF for this llama.cpp "
                         "version, and does it fit? (llama.cpp's log above says which)")
    return model


def _place(params: llama_cpp.llama_model_params, offload: Offload) -> object:
    """Sets where the weights go, through llama.cpp's own device selection (every GPU this process sees; the
    gateway hides the others with CUDA_VISIBLE_DEVICES). A copy on the CPU asks for no layers and a main GPU of
    -1, which leaves llama.cpp no device at all, so a GPU build never ships its batches to a GPU the copy does not
    hold. GPUs seen but not held (a standalone copy asked for fewer) get a share of 0 of the layers.

    No explicit `devices` list: on an H100 with a CUDA build, a list together with pier's log callback crashed
    llama_model_load_from_file (docs/benchmarks.md, "pier on one GPU"); either alone loaded."""
    params.n_gpu_layers = offload.gpu_layers if offload.on_gpu else 0
    params.split_mode = SPLIT_MODES.index(offload.split_mode)  # llama_split_mode: none, layer, row
    params.main_gpu = offload.main_gpu if offload.on_gpu else -1
    shares = _layer_shares(offload, len(gpu_devices()) if offload.on_gpu else 0)
    if shares is None:
        return None
    array = (ctypes.c_float * llama_cpp.llama_max_devices())(*shares)
    params.tensor_split = array
    return array


def _layer_shares(offload: Offload, visible: int) -> tuple[float, ...] | None:
    """llama.cpp's tensor_split: the operator's shares, or equal ones over the GPUs held and none for the others."""
    if offload.tensor_split is not None:
        return offload.tensor_split
    if not offload.on_gpu or len(offload.gpus) >= visible:
        return None
    return tuple(1.0 if i in offload.gpus else 0.0 for i in range(visible))


def gpu_devices() -> list[Device]:
    return [device for _, device in device_handles() if device.is_gpu]


def set_flash_attn(params: llama_cpp.llama_context_params, flash_attn: bool | None) -> None:
    """None leaves llama.cpp's own choice (on for CPUs)."""
    if flash_attn is not None:
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )


def tokenize(vocab: llama_cpp.llama_vocab_p, text: str, add_special: bool, parse_special: bool) -> list[int]:
    data = text.encode("utf-8")
    capacity = len(data) + 8
    while True:
        buf = (llama_cpp.llama_token * capacity)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, capacity, add_special, parse_special)
        if n >= 0:
            return list(buf[:n])
        capacity = -n


class LlamaRunner:
    def __init__(
        self, model_path: str | Path, *, n_ctx: int = 4096, n_seq_max: int = 32, n_batch: int = 512,
        n_threads: int | None = None, flash_attn: bool | None = None, kv_type: str = "f16",
        separate_decode_rows: bool = True, offload: Offload = ON_CPU,
    ) -> None:
        path = Path(model_path)
        self.n_threads = n_threads or engine_threads(usable_cores())
        self.offload = offload
        self._model = load_model(path, offload)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._ctx = self._new_context(n_ctx, n_seq_max, n_batch, flash_attn, kv_type)
        # llama.cpp's CPU flash attention (on unless turned off) tiles steps of 64+ tokens over F16/F32 KV; a GPU's
        # kernels run a step's rows in parallel, so there one llama_decode per step is cheapest
        self._split_passes = (separate_decode_rows and not offload.on_gpu and flash_attn is not False
                              and kv_type in ("f16", "f32"))
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self.adapters = LoadedAdapters(self._model, self._ctx)
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        # the context's last sequence id is the runner's own scratch (saving or restoring part of a sequence)
        self.n_seq_max = llama_cpp.llama_n_seq_max(self._ctx) - 1
        self._scratch = self.n_seq_max
        self.n_batch = llama_cpp.llama_n_batch(self._ctx)
        self.info = self._model_info(path)
        model = self._model
        self.memory = ModelMemory(window=llama_cpp.llama_model_n_swa(model), recurrent=bool(
            llama_cpp.llama_model_is_recurrent(model) or llama_cpp.llama_model_is_hybrid(model)))
        self._pieces: dict[int, bytes] = {}
        self._batch_arrays(self.n_batch)

    # -- loading ---------------------------------------------------------------------------------

    def _new_context(
        self, n_ctx: int, n_seq_max: int, n_batch: int, flash_attn: bool | None, kv_type: str
    ) -> llama_cpp.llama_context_p:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = n_batch
        params.n_seq_max = min(n_seq_max + 1, LLAMA_MAX_SEQ)  # one more: the scratch sequence (`save`, `restore`)
        # llama.cpp reserves one output row per sequence id when it creates the context and aborts the process
        # when that is more rows than a batch may output (n_batch by default): a copy with 256 ids for idle
        # prefixes and PIER_BATCH_TOKENS=128 would die at start.
        params.n_outputs_max = max(n_batch, params.n_seq_max)
        params.n_threads = params.n_threads_batch = self.n_threads
        params.kv_unified = True  # one cell pool for all sequences: seq_cp shares a prefix for free
        params.no_perf = True
        params.op_offload = self.offload.on_gpu  # a CPU copy never ships its big batches to a GPU it does not hold
        params.type_k = params.type_v = _kv_ggml_type(kv_type)
        set_flash_attn(params, flash_attn)
        ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not ctx:
            raise MemoryError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {n_seq_max} sequences: "
                "lower the context size or the number of parallel sequences."
            )
        return ctx

    def _model_info(self, path: Path) -> ModelInfo:
        template = llama_cpp.llama_model_chat_template(self._model, None)
        return ModelInfo(
            name=self._meta("general.name") or path.stem, path=str(path),
            n_vocab=llama_cpp.llama_vocab_n_tokens(self._vocab),
            n_ctx_train=llama_cpp.llama_model_n_ctx_train(self._model),
            bos=llama_cpp.llama_vocab_bos(self._vocab), eos=llama_cpp.llama_vocab_eos(self._vocab),
            add_bos=bool(llama_cpp.llama_vocab_get_add_bos(self._vocab)),
            chat_template=template.decode("utf-8") if template else None,
            n_params=llama_cpp.llama_model_n_params(self._model), size_bytes=os.path.getsize(path),
            devices=self._devices_shown(),
        )

    def _devices_shown(self) -> tuple[str, ...]:
        if not self.offload.on_gpu:
            return ("CPU",)
        gpus = gpu_devices()
        return tuple(gpus[i].shown() for i in self.offload.gpus)

    def _meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def _batch_arrays(self, n: int) -> None:
        """numpy arrays llama_decode reads through a llama_batch, so filling a batch is a few slice copies."""
        self._tok = np.zeros(n, np.int32)
        self._pos = np.zeros(n, np.int32)
        self._n_seq = np.ones(n, np.int32)
        self._seq = np.zeros(n, np.int32)
        self._out = np.zeros(n, np.int8)
        seq_base = self._seq.ctypes.data
        pointer = ctypes.POINTER(llama_cpp.llama_seq_id)
        self._seq_ptrs = (pointer * n)(*(ctypes.cast(seq_base + 4 * i, pointer) for i in range(n)))

    # -- vocabulary (read-only: safe from any thread) ---------------------------------------------

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]:
        return tokenize(self._vocab, text, add_bos, special)

    def piece(self, token: int) -> bytes:
        cached = self._pieces.get(token)
        if cached is None:
            buf = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            cached = self._pieces[token] = buf.raw[:n]
        return cached

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        return self._vocab

    # -- forward pass and memory (engine thread only) ---------------------------------------------

    def decode(self, batch: Batch) -> np.ndarray:
        """The logits of the batch's output rows, in batch order. A step is cut into several llama_decode calls
        when that spares llama.cpp's attention work (`passes.plan_passes`); one that fails half way takes back
        the cells its earlier calls wrote, so KvCacheFull still means nothing changed."""
        passes = plan_adapter_passes(batch.seq_ids, batch.adapters, tiled=self._split_passes,
                                     first=self.adapters.current)
        if len(passes) == 1:
            self.adapters.use(passes[0][0])
            n_out = self._forward(batch.tokens, batch.positions, batch.seq_ids, batch.outputs)
            return self._logits(n_out)
        return self._decode_passes(batch, passes)

    def _decode_passes(self, batch: Batch, passes: list[tuple[str, list[int]]]) -> np.ndarray:
        """Each pass under its own LoRA adapter (the base model's: "")."""
        tokens, positions = np.asarray(batch.tokens, np.int32), np.asarray(batch.positions, np.int32)
        seq_ids, outputs = np.asarray(batch.seq_ids, np.int32), np.asarray(batch.outputs, np.bool_)
        out_row = np.cumsum(outputs) - 1  # each batch row's row among the outputs
        logits = np.empty((int(outputs.sum()), self.info.n_vocab), np.float32)
        done: list[list[int]] = []
        try:
            for adapter, rows in passes:
                self.adapters.use(adapter)
                n_out = self._forward(tokens[rows], positions[rows], seq_ids[rows], outputs[rows])
                if n_out:
                    logits[out_row[rows][outputs[rows]]] = self._logits(n_out)
                done.append(rows)
        except Exception:
            for rows in done:  # each sequence's rows are in one pass: removing from its first one undoes it
                for run in runs(seq_ids[rows].tolist()):
                    first = rows[run.start]
                    self.remove(batch.seq_ids[first], batch.positions[first])
            raise
        return logits

    def _forward(self, tokens: Column, positions: Column, seq_ids: Column, outputs: Column) -> int:
        """One llama_decode; returns how many rows asked for logits."""
        n = len(tokens)
        self._tok[:n] = tokens
        self._pos[:n] = positions
        self._seq[:n] = seq_ids
        self._out[:n] = outputs
        native = llama_cpp.llama_batch(
            n_tokens=n, token=self._tok.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token)), embd=None,
            pos=self._pos.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_pos)),
            n_seq_id=self._n_seq.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), seq_id=self._seq_ptrs,
            logits=self._out.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )
        status = llama_cpp.llama_decode(self._ctx, native)
        if status == 1:
            raise KvCacheFull(f"no KV cells left for a batch of {n} tokens")
        if status != 0:
            raise RuntimeError(f"llama_decode failed with status {status} on a batch of {n} tokens")
        return int(self._out[:n].sum())

    def _logits(self, n_out: int) -> np.ndarray:
        """The last llama_decode's logits, read in place (the next call overwrites them)."""
        if n_out == 0:
            return np.empty((0, self.info.n_vocab), np.float32)
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits(self._ctx), shape=(n_out, self.info.n_vocab))

    def remove(self, seq_id: int, start: int = 0) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, seq_id, start, -1)

    def held(self, seq_id: int) -> HeldPositions:
        last = llama_cpp.llama_memory_seq_pos_max(self._memory, seq_id)
        return HeldPositions(llama_cpp.llama_memory_seq_pos_min(self._memory, seq_id), last) if last >= 0 else NOTHING

    def copy(self, src: int, dst: int, length: int) -> None:
        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, 0, length)

    def save(self, seq_id: int, start: int = 0) -> SeqState:
        if not start:
            return self._state(seq_id)
        # llama.cpp saves whole sequences: lend positions start.. to the scratch sequence and save that
        llama_cpp.llama_memory_seq_cp(self._memory, seq_id, self._scratch, start, -1)
        try:
            return self._state(self._scratch)
        finally:
            llama_cpp.llama_memory_seq_rm(self._memory, self._scratch, -1, -1)

    def _state(self, seq_id: int) -> SeqState:
        size = llama_cpp.llama_state_seq_get_size(self._ctx, seq_id)
        state = bytearray(size)  # written in place through a ctypes view: one copy of the KV, not two
        written = llama_cpp.llama_state_seq_get_data(self._ctx, _uint8_view(state), size, seq_id)
        if written != size:
            raise RuntimeError(f"llama_state_seq_get_data wrote {written} of {size} bytes for sequence {seq_id}")
        return state

    def restore(self, seq_id: int, state: SeqState) -> bool:
        buffer = state if isinstance(state, bytearray) else bytearray(state)
        if llama_cpp.llama_memory_seq_pos_max(self._memory, seq_id) < 0:  # empty: written in place
            # llama.cpp empties seq_id first and, when too few cells are free, leaves it empty and returns 0
            return bool(llama_cpp.llama_state_seq_set_data(self._ctx, _uint8_view(buffer), len(buffer), seq_id))
        # llama.cpp writes a state only into an empty sequence: write it into the scratch one, then let seq_id
        # share those cells (metadata only)
        try:
            if not llama_cpp.llama_state_seq_set_data(self._ctx, _uint8_view(buffer), len(buffer), self._scratch):
                return False
            llama_cpp.llama_memory_seq_cp(self._memory, self._scratch, seq_id, -1, -1)
            return True
        finally:
            llama_cpp.llama_memory_seq_rm(self._memory, self._scratch, -1, -1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._memory, True)

    def close(self) -> None:
        # Each handle is freed once, even if close() runs again or __init__ stopped half way.
        if ctx := self.__dict__.pop("_ctx", None):
            llama_cpp.llama_free(ctx)
        if model := self.__dict__.pop("_model", None):
            llama_cpp.llama_model_free(model)
