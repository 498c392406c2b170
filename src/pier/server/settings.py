"""How one model server is configured: the SageMaker and TGI container environment, plus pier's own knobs.

Names follow the containers users already deploy (`SAGEMAKER_BIND_TO_PORT`, `MAX_TOTAL_TOKENS`, ...),
so an endpoint's Environment block moves to pier unchanged. Explicit arguments win over the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pier.channel.concurrency import (
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    DEFAULT_PARALLEL,
    MAX_CONCURRENT_REQUESTS,
    PARALLEL,
)
from pier.channel.copy_secret import COPY_SECRET_ENV
from pier.deadline import before_client_gives_up
from pier.engine.kv_type import DEFAULT_KV_TYPE, KV_TYPE_NAMES
from pier.engine.offload import SPLIT_MODES, GpuSettings
from pier.engine.scheduler import ITL_BOUND
from pier.env import Env, SettingsError, boolean, boolean_or_auto, choice, integer, number
from pier.multi_model import CACHE_ENV, MEMORY_ENV, is_multi_model

DEFAULT_MODEL_DIR = "/opt/ml/model"
DEFAULT_CONTEXT = 4096
DEFAULT_HOST_CACHE_MB = 8192  # llama-server's --cache-ram default
MAX_SPECULATE = 16  # drafted tokens per step: longer drafts are rarely kept whole


@dataclass(frozen=True)
class HandlerSettings:
    """Where a model's own inference.py is looked for and kept (pier.server.byoc), in SageMaker's names."""

    program: str | None = None  # SAGEMAKER_PROGRAM: the script's name (default inference.py)
    submit_directory: str | None = None  # SAGEMAKER_SUBMIT_DIRECTORY: a folder, file://, or a sourcedir.tar.gz
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "pier")  # unpacked code, environments
    s3_region: str = "us-east-1"  # for an s3:// SAGEMAKER_SUBMIT_DIRECTORY
    s3_endpoint: str | None = None  # AWS_ENDPOINT_URL_S3: an S3-compatible store (AWS_ENDPOINT_URL is pier's own)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HandlerSettings:
        read = Env(env)
        cache = read.get("PIER_CACHE_DIR", cast=Path) or (
            read.get("XDG_CACHE_HOME", cast=Path) or Path.home() / ".cache") / "pier"
        return cls(program=read.text("SAGEMAKER_PROGRAM"), submit_directory=read.text("SAGEMAKER_SUBMIT_DIRECTORY"),
                   cache_dir=cache, s3_endpoint=read.text("AWS_ENDPOINT_URL_S3"),
                   s3_region=read.get("AWS_REGION", "AWS_DEFAULT_REGION", "SAGEMAKER_REGION", cast=str,
                                      default="us-east-1"))


@dataclass(frozen=True)
class MultiModelSettings:
    """A multi-model copy's settings (SAGEMAKER_MULTI_MODEL=true: it serves every model under its folder, by name;
    pier.server.multi_model.app)."""

    memory_mb: float = 4096.0  # PIER_MULTI_MODEL_MEMORY_MB: what its loaded models may take together
    keep_models: bool = True  # PIER_MODEL_CACHE (MultiModelConfig.ModelCacheSetting): Enabled keeps them loaded

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MultiModelSettings | None:
        """None: not a multi-model copy."""
        read = Env(env)
        if not is_multi_model(read.values):
            return None
        return cls(memory_mb=read.get(MEMORY_ENV, cast=number(
            "a number of MB above 0 (the memory the copy's models may take, e.g. 4096)", above=0), default=4096.0),
            keep_models=read.get(CACHE_ENV, cast=_model_cache, default=True))


def _model_cache(raw: str) -> bool:
    if raw not in ("Enabled", "Disabled"):
        raise ValueError("Enabled or Disabled (MultiModelConfig.ModelCacheSetting)")
    return raw == "Enabled"


@dataclass(frozen=True)
class ServerSettings:
    model: str = DEFAULT_MODEL_DIR  # a folder holding a .gguf (or code/inference.py), or a .gguf file
    host: str = "0.0.0.0"
    port: int = 8080
    model_name: str | None = None  # the name clients see; default: HF_MODEL_ID or the GGUF's own name
    # TGI's limits. None = derived from the context size once the model is loaded.
    max_input_tokens: int | None = None
    max_total_tokens: int | None = None
    max_batch_total_tokens: int | None = None  # the KV budget shared by all requests = llama.cpp n_ctx
    max_concurrent_requests: int = 128
    max_stop_sequences: int = 4
    messages_api_enabled: bool = True  # accepted for TGI compatibility: chat is always served
    chat_template: str | None = None  # CHAT_TEMPLATE: a llama.cpp built-in's name, a file, or a jinja2 template
    # pier's engine
    threads: int | None = None  # None = the cores this process may use
    parallel: int = 8  # sequences decoding at once
    batch_tokens: int = 512  # most tokens in one forward pass
    prefix_cache: bool = True
    prefix_floor_cells: int | None = None  # KV cells finished prompts always may keep; None = 1/16 of the cache
    host_cache_mb: int = DEFAULT_HOST_CACHE_MB  # host memory for prefixes evicted from the KV cache; 0 = none
    # llama.cpp's flash attention; None = its own choice (on for CPUs). Faster, but a token's result then depends
    # on how it was batched: off makes recomputed tokens (a resumed request, a cached prefix) bit-exact.
    flash_attention: bool | None = None
    # decode rows in forward passes of their own when a step would take flash attention's tiled path
    # (pier.engine.passes); off runs every step as one llama_decode, as llama-server does
    separate_decode_rows: bool = True
    # the scheduling policy's k (engine/scheduler.py): a step beside running streams costs at most k decode-only
    # steps; None lets prompts fill whole steps, as llama-server does (PIER_ITL_BOUND=off)
    itl_bound: float | None = ITL_BOUND
    # n-gram speculation (pier.engine.draft): drafted tokens a generating sequence may feed with its next one
    # (TGI's SPECULATE); 0 = off
    speculate: int = 0
    # llama.cpp's type_k and type_v (pier.engine.kv_type): q8_0 and q4_0 hold 1.9x and 3.6x the tokens of f16
    kv_cache_type: str = "f16"
    kv_cache_mb: int | None = None  # the KV cache's memory, sized in cells of kv_cache_type; None = context_size
    # GPUs (pier.engine.offload): how many the copy holds (None = every one it sees), and llama-server's knobs
    gpu: GpuSettings = field(default_factory=GpuSettings)
    handler: HandlerSettings = field(default_factory=HandlerSettings)  # a model's own inference.py
    multi_model: MultiModelSettings | None = None  # None: one model (the usual copy)
    # SageMaker's container contract
    timeout_s: float = 60.0
    workers: int = 1
    drain_s: float = 25.0  # SIGKILL follows SIGTERM after 30 s
    log_level: str = "info"
    # PIER_COPY_SECRET is set: a gateway started this copy (only it reaches it), so it takes adapters from it
    from_gateway: bool = False

    @property
    def cache_dir(self) -> Path:
        """pier's cache on this host (PIER_CACHE_DIR, else XDG_CACHE_HOME/pier): handlers' code and environments,
        the CPU kernels proven for each kind of model."""
        return self.handler.cache_dir

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Settings from the environment; keyword arguments that are not None win."""
        read = Env(env)
        settings = cls(
            model=_model_source(read),
            host=read.get("PIER_HOST", cast=str, default="0.0.0.0"),
            port=read.get("SAGEMAKER_BIND_TO_PORT", cast=integer(high=65535), default=8080),
            model_name=read.text("PIER_MODEL_NAME", "HF_MODEL_ID"),
            max_input_tokens=read.get("MAX_INPUT_TOKENS", "MAX_INPUT_LENGTH", cast=integer()),
            max_total_tokens=read.get("MAX_TOTAL_TOKENS", cast=integer()),
            max_batch_total_tokens=read.get("MAX_BATCH_TOTAL_TOKENS", cast=integer()),
            max_concurrent_requests=read.get(*MAX_CONCURRENT_REQUESTS, cast=integer(),
                                             default=DEFAULT_MAX_CONCURRENT_REQUESTS),
            max_stop_sequences=read.get("MAX_STOP_SEQUENCES", cast=integer(low=0), default=4),
            messages_api_enabled=read.get("MESSAGES_API_ENABLED", cast=boolean, default=True),
            chat_template=_chat_template(read.values),
            threads=read.get("PIER_THREADS", cast=integer()),
            parallel=read.get(*PARALLEL, cast=integer(), default=DEFAULT_PARALLEL),
            batch_tokens=read.get("PIER_BATCH_TOKENS", "MAX_BATCH_PREFILL_TOKENS", cast=integer(), default=512),
            prefix_cache=read.get("PIER_PREFIX_CACHE", cast=boolean, default=True),
            prefix_floor_cells=read.get("PIER_PREFIX_CACHE_FLOOR_CELLS", cast=integer(low=0)),
            host_cache_mb=read.get("PIER_HOST_CACHE_MB", cast=integer(low=0), default=DEFAULT_HOST_CACHE_MB),
            flash_attention=read.get("PIER_FLASH_ATTENTION", cast=boolean_or_auto),
            separate_decode_rows=read.get("PIER_SEPARATE_DECODE_ROWS", cast=boolean, default=True),
            itl_bound=read.get("PIER_ITL_BOUND", cast=_itl_bound, default=DEFAULT_ITL_BOUND),
            speculate=read.get("SPECULATE", cast=integer(low=0, high=MAX_SPECULATE), default=0),
            kv_cache_type=read.get("PIER_KV_CACHE_TYPE", cast=choice(*KV_TYPE_NAMES), default=DEFAULT_KV_TYPE),
            kv_cache_mb=read.get("PIER_KV_CACHE_MB", cast=integer()),
            gpu=_gpu_settings(read),
            handler=HandlerSettings.from_env(env),
            multi_model=MultiModelSettings.from_env(env),
            timeout_s=read.get("SAGEMAKER_MODEL_SERVER_TIMEOUT", cast=number(low=0.001), default=60.0),
            workers=read.get("SAGEMAKER_MODEL_SERVER_WORKERS", cast=integer(), default=1),
            drain_s=read.get("PIER_DRAIN_SECONDS", cast=number(low=0.0), default=25.0),
            log_level=read.get("PIER_LOG_LEVEL", cast=str, default="info").lower(),
            from_gateway=read.has(COPY_SECRET_ENV),
        )
        settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
        if settings.kv_cache_mb is not None and settings.max_batch_total_tokens is not None:
            raise SettingsError("PIER_KV_CACHE_MB and MAX_BATCH_TOTAL_TOKENS both size the KV cache: set only one "
                                "(memory, or cells).")
        return settings

    @property
    def context_size(self) -> int:
        """llama.cpp's n_ctx: the KV cells all requests share."""
        if self.max_batch_total_tokens is not None:
            return self.max_batch_total_tokens
        return max(self.max_total_tokens or 0, DEFAULT_CONTEXT)

    @property
    def request_deadline_s(self) -> float:
        """When a request is ended with an error: a little before the timeout, so the error reaches a
        client whose own timeout is the same number (boto3's 60 s) before that client gives up."""
        return before_client_gives_up(self.timeout_s)


def _gpu_settings(read: Env) -> GpuSettings:
    """PIER_GPUS is what the gateway gave the copy; SM_NUM_GPUS and NUM_SHARD are TGI's names for the same; the
    rest are llama-server's (its LLAMA_ARG_* environment names too)."""
    return GpuSettings(
        gpus=read.get("PIER_GPUS", "SM_NUM_GPUS", "NUM_SHARD", cast=integer(low=0)),
        gpu_layers=read.get("PIER_GPU_LAYERS", "LLAMA_ARG_N_GPU_LAYERS", "N_GPU_LAYERS", cast=_layers),
        split_mode=read.get("PIER_SPLIT_MODE", "LLAMA_ARG_SPLIT_MODE", cast=choice(*SPLIT_MODES), default="layer"),
        main_gpu=read.get("PIER_MAIN_GPU", "LLAMA_ARG_MAIN_GPU", cast=integer(low=0), default=0),
        tensor_split=read.get("PIER_TENSOR_SPLIT", "LLAMA_ARG_TENSOR_SPLIT", cast=_shares),
    )


def _model_source(read: Env) -> str:
    """HF_MODEL_ID when it names a local path (a Hub id is only a display name here), else SM_MODEL_DIR,
    else SageMaker's /opt/ml/model."""
    hf_model = read.values.get("HF_MODEL_ID")
    if hf_model and os.path.exists(hf_model):
        return hf_model
    return read.values.get("SM_MODEL_DIR") or DEFAULT_MODEL_DIR


def _chat_template(values: Mapping[str, str]) -> str | None:
    return values.get("CHAT_TEMPLATE") or None  # as it is: a template's own blanks are its own


def _layers(raw: str) -> int | None:
    """A layer count, or all / auto / -1 (None: every layer)."""
    if raw.strip('"').lower() in ("all", "auto", "-1"):
        return None
    return integer(low=0)(raw)


def _shares(raw: str) -> tuple[float, ...]:
    """Comma- or slash-separated proportions, one per GPU ("3,1"), as llama-server's --tensor-split."""
    try:
        shares = tuple(float(part) for part in raw.strip('"').replace("/", ",").split(","))
    except ValueError:
        raise ValueError("numbers separated by commas, one per GPU (e.g. 3,1)") from None
    if any(share < 0 for share in shares) or sum(shares) <= 0:
        raise ValueError("shares of at least 0 with a positive sum")
    return shares


DEFAULT_ITL_BOUND: float | None = ITL_BOUND


def _itl_bound(raw: str) -> float | None:
    """PIER_ITL_BOUND: a number of decode-only steps, 1 or more, or off."""
    if raw.strip().strip("'\"").lower() in ("off", "none"):
        return None
    try:
        return number(low=1.0)(raw)
    except ValueError:
        raise ValueError("a number of decode-only steps, 1 or more (2 by default), or off") from None
