"""How one model server is configured: the SageMaker and TGI container environment, plus pier's own knobs.

Names follow the containers users already deploy (`SAGEMAKER_BIND_TO_PORT`, `MAX_TOTAL_TOKENS`, ...),
so an endpoint's Environment block moves to pier unchanged. Explicit arguments win over the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pier.deadline import before_client_gives_up
from pier.engine.kv_type import DEFAULT_KV_TYPE, KV_TYPE_NAMES
from pier.engine.offload import SPLIT_MODES, GpuSettings

DEFAULT_MODEL_DIR = "/opt/ml/model"
DEFAULT_CONTEXT = 4096
DEFAULT_HOST_CACHE_MB = 8192  # llama-server's --cache-ram default


class SettingsError(ValueError):
    """A setting has a value the server cannot use; the message names the variable and the fix."""


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
    # llama.cpp's type_k and type_v (pier.engine.kv_type): q8_0 and q4_0 hold 1.9x and 3.6x the tokens of f16
    kv_cache_type: str = "f16"
    kv_cache_mb: int | None = None  # the KV cache's memory, sized in cells of kv_cache_type; None = context_size
    # GPUs (pier.engine.offload): how many the copy holds (None = every one it sees), and llama-server's knobs
    gpu: GpuSettings = field(default_factory=GpuSettings)
    # SageMaker's container contract
    timeout_s: float = 60.0
    workers: int = 1
    drain_s: float = 25.0  # SIGKILL follows SIGTERM after 30 s
    log_level: str = "info"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ServerSettings:
        """Settings from the environment; keyword arguments that are not None win."""
        env = os.environ if env is None else env
        read = _Reader(env)
        hf_model = env.get("HF_MODEL_ID")
        settings = cls(
            model=_model_source(env),
            host=read.text("PIER_HOST", default="0.0.0.0"),
            port=read.integer("SAGEMAKER_BIND_TO_PORT", default=8080, low=1, high=65535),
            model_name=env.get("PIER_MODEL_NAME") or hf_model,
            max_input_tokens=read.integer("MAX_INPUT_TOKENS", "MAX_INPUT_LENGTH"),
            max_total_tokens=read.integer("MAX_TOTAL_TOKENS"),
            max_batch_total_tokens=read.integer("MAX_BATCH_TOTAL_TOKENS"),
            max_concurrent_requests=read.integer("MAX_CONCURRENT_REQUESTS", default=128),
            max_stop_sequences=read.integer("MAX_STOP_SEQUENCES", default=4, low=0),
            messages_api_enabled=read.boolean("MESSAGES_API_ENABLED", default=True),
            chat_template=env.get("CHAT_TEMPLATE") or None,
            threads=read.integer("PIER_THREADS"),
            parallel=read.integer("PIER_PARALLEL", "MAX_BATCH_SIZE", default=8),
            batch_tokens=read.integer("PIER_BATCH_TOKENS", "MAX_BATCH_PREFILL_TOKENS", default=512),
            prefix_cache=read.boolean("PIER_PREFIX_CACHE", default=True),
            prefix_floor_cells=read.integer("PIER_PREFIX_CACHE_FLOOR_CELLS", low=0),
            host_cache_mb=read.integer("PIER_HOST_CACHE_MB", default=DEFAULT_HOST_CACHE_MB, low=0),
            flash_attention=read.optional_boolean("PIER_FLASH_ATTENTION"),
            separate_decode_rows=read.boolean("PIER_SEPARATE_DECODE_ROWS", default=True),
            kv_cache_type=read.choice("PIER_KV_CACHE_TYPE", choices=KV_TYPE_NAMES, default=DEFAULT_KV_TYPE),
            kv_cache_mb=read.integer("PIER_KV_CACHE_MB"),
            gpu=_gpu_settings(read),
            timeout_s=read.number("SAGEMAKER_MODEL_SERVER_TIMEOUT", default=60.0),
            workers=read.integer("SAGEMAKER_MODEL_SERVER_WORKERS", default=1),
            drain_s=read.number("PIER_DRAIN_SECONDS", default=25.0, low=0.0),
            log_level=read.text("PIER_LOG_LEVEL", default="info").lower(),
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


def _gpu_settings(read: _Reader) -> GpuSettings:
    """PIER_GPUS is what the gateway gave the copy; SM_NUM_GPUS and NUM_SHARD are TGI's names for the same; the
    rest are llama-server's (its LLAMA_ARG_* environment names too)."""
    return GpuSettings(
        gpus=read.integer("PIER_GPUS", "SM_NUM_GPUS", "NUM_SHARD", low=0),
        gpu_layers=read.layers("PIER_GPU_LAYERS", "LLAMA_ARG_N_GPU_LAYERS", "N_GPU_LAYERS"),
        split_mode=read.choice("PIER_SPLIT_MODE", "LLAMA_ARG_SPLIT_MODE", choices=SPLIT_MODES, default="layer"),
        main_gpu=read.integer("PIER_MAIN_GPU", "LLAMA_ARG_MAIN_GPU", default=0, low=0),
        tensor_split=read.shares("PIER_TENSOR_SPLIT", "LLAMA_ARG_TENSOR_SPLIT"),
    )


def _model_source(env: Mapping[str, str]) -> str:
    """HF_MODEL_ID when it names a local path (a Hub id is only a display name here), else SM_MODEL_DIR,
    else SageMaker's /opt/ml/model."""
    hf_model = env.get("HF_MODEL_ID")
    if hf_model and os.path.exists(hf_model):
        return hf_model
    return env.get("SM_MODEL_DIR") or DEFAULT_MODEL_DIR


class _Reader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def _raw(self, names: tuple[str, ...]) -> tuple[str, str] | None:
        for name in names:
            value = self.env.get(name)
            if value is not None and value.strip() != "":
                return name, value.strip()
        return None

    def text(self, *names: str, default: str) -> str:
        found = self._raw(names)
        return found[1] if found else default

    def integer(self, *names: str, default: int | None = None, low: int = 1, high: int | None = None) -> Any:
        found = self._raw(names)
        if found is None:
            return default
        name, value = found
        try:
            number = int(value.strip('"'))  # sagemaker SDK users often json.dumps() their numbers
        except ValueError:
            raise SettingsError(
                f"{name} must be an integer; got {value!r}. Fix it in the environment."
            ) from None
        if number < low or (high is not None and number > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise SettingsError(f"{name} must be {bound}; got {number}. Fix it in the environment.")
        return number

    def number(self, *names: str, default: float, low: float = 0.001) -> float:
        found = self._raw(names)
        if found is None:
            return default
        name, value = found
        try:
            number = float(value.strip('"'))
        except ValueError:
            raise SettingsError(f"{name} must be a number of seconds; got {value!r}.") from None
        if not number >= low:
            raise SettingsError(f"{name} must be at least {low}; got {number}. Fix it in the environment.")
        return number

    def layers(self, *names: str) -> int | None:
        """A layer count, or all / auto / -1 (None: every layer)."""
        found = self._raw(names)
        if found is None or found[1].strip('"').lower() in ("all", "auto", "-1"):
            return None
        return self.integer(*names, low=0)

    def shares(self, *names: str) -> tuple[float, ...] | None:
        """Comma- or slash-separated proportions, one per GPU ("3,1"), as llama-server's --tensor-split."""
        found = self._raw(names)
        if found is None:
            return None
        name, value = found
        try:
            shares = tuple(float(part) for part in value.strip('"').replace("/", ",").split(","))
        except ValueError:
            raise SettingsError(f"{name} must be numbers separated by commas, one per GPU (e.g. 3,1); got "
                                f"{value!r}.") from None
        if any(share < 0 for share in shares) or sum(shares) <= 0:
            raise SettingsError(f"{name} must be shares of at least 0 with a positive sum; got {value!r}.")
        return shares

    def optional_boolean(self, *names: str) -> bool | None:
        """true, false, or auto (None)."""
        found = self._raw(names)
        if found is None or found[1].strip('"').lower() == "auto":
            return None
        return self.boolean(*names, default=False)

    def choice(self, *names: str, choices: tuple[str, ...], default: str) -> str:
        found = self._raw(names)
        if found is None:
            return default
        name, value = found
        lowered = value.strip('"').lower()
        if lowered not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}; got {value!r}. Fix it in the "
                                "environment.")
        return lowered

    def boolean(self, *names: str, default: bool) -> bool:
        found = self._raw(names)
        if found is None:
            return default
        name, value = found
        lowered = value.strip('"').lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"{name} must be true or false; got {value!r}. Fix it in the environment.")
