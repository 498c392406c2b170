"""Every `PIER_*` environment variable pier reads: one table, from which docs/settings.md is written.

    python -m pier.variables docs/settings.md  # after changing the table

Each process reads its own once, where it starts, through `pier.env.Env` (the gateway's `GatewaySettings`, a
copy's `ServerSettings`, the CLI's options) and passes them down; none is read while a request is answered.
tests/test_variables.py fails when a `PIER_*` name in src/pier is missing here, or docs/settings.md differs
from this table. Imports nothing of pier.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

GATEWAY = "gateway"  # pier up / python -m pier.gateway, at start
COPY = "copy"  # a model server (pier container, or a copy the gateway runs), at start
CLI = "CLI"  # the pier command
WORKER = "worker"  # a bring-your-own-code copy's worker process


@dataclass(frozen=True)
class Variable:
    name: str
    type: str
    default: str
    meaning: str
    reader: str  # which process reads it (GATEWAY, COPY, CLI, WORKER)


V = Variable
VARIABLES: tuple[Variable, ...] = (
    # ---- the gateway
    V("PIER_STATE_DIR", "path", "~/.pier", "the state folder (endpoints, keys, queues); also the CLI's, to find "
      "its keys", f"{GATEWAY}, {CLI}"),
    V("PIER_STATE_URL", "postgresql:// URL", "(none: the state folder's files)", "keep every store in this "
      "PostgreSQL database, like --state-url (docs/state.md)", GATEWAY),
    V("PIER_ALLOWED_HOSTS", "names, comma-separated", "(none)", "Host names answered besides loopback and the "
      "bound address, like --allow-host; * for any", GATEWAY),
    V("PIER_ALLOWED_ORIGINS", "origins, comma-separated", "(none)", "browser origins allowed besides pier's own, "
      "like --allow-origin", GATEWAY),
    V("PIER_GRACE_PERIOD_S", "seconds", "30", "on SIGTERM, how long requests in flight may finish (--grace-period "
      "wins)", GATEWAY),
    V("PIER_MAX_COPIES_PER_HOST", "integer >= 1", "from the host's cores and memory (1024 on a cluster)",
      "the most copies the gateway runs on one host", GATEWAY),
    V("PIER_FAKE_GPUS", "integer >= 0", "(the driver's GPUs)", "stand in this many fake GPUs (tests, demos)",
      f"{GATEWAY}, {CLI}"),
    V("PIER_QUEUE_SIZE", "integer >= 0", "512", "requests that may wait per inference component; one more is a "
      "429 ThrottlingException", GATEWAY),
    V("PIER_QUEUE_TIMEOUT_SECONDS", "seconds", "30", "the longest a request waits for a copy with room",
      GATEWAY),
    V("PIER_INVOCATION_TIMEOUT_SECONDS", "seconds > 0", "60", "how long clients wait for an answer (boto3's read "
      "timeout); the gateway ends an invocation a little before", GATEWAY),
    V("PIER_STREAM_TIMEOUT_SECONDS", "seconds", "(no bound)", "the longest a whole stream may last; 0: no bound",
      GATEWAY),
    V("PIER_SESSION_TTL_SECONDS", "seconds", "1200", "a stateful session's life from its opening", GATEWAY),
    V("PIER_ASYNC_NOTIFICATION_URL", "URL", "(logged only)", "where notifications for SNS topics of asynchronous "
      "inference are POSTed", GATEWAY),
    V("PIER_STATE_BACKUP_MINUTES", "minutes > 0", "15", "how often the state is backed up (when it changed)",
      GATEWAY),
    V("PIER_STATE_BACKUPS", "integer >= 1", "5", "backups kept of each state file", GATEWAY),
    V("PIER_AUTOSCALING_INTERVAL_S", "seconds > 0", "5", "how often the scaler evaluates policies and alarms",
      GATEWAY),
    V("PIER_AUTOSCALING_WINDOW_S", "seconds > 0", "60", "the window per-minute metrics are read over", GATEWAY),
    V("PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S", "seconds > 0", "10", "the window high-resolution metrics are "
      "read over", GATEWAY),
    V("PIER_METRICS_RETENTION_S", "seconds > 0", "10800", "metric history older than this is dropped", GATEWAY),
    V("PIER_AUTOSCALING_WAKE", "boolean", "true", "a request for a component at zero copies starts one at once",
      GATEWAY),
    V("PIER_CAPTURE_QUEUE_SIZE", "integer >= 1", "10000", "data capture records waiting to be written; more are "
      "dropped", GATEWAY),
    V("PIER_CAPTURE_QUEUE_MB", "MiB", "128", "data capture bytes waiting to be written; more are dropped",
      GATEWAY),
    V("PIER_CAPTURE_FLUSH_SECONDS", "seconds > 0", "5", "how long captured records gather before they are "
      "written", GATEWAY),
    V("PIER_LORA_SCALE", "number", "1", "an adapter's scale, in the adapter inference component's "
      "Container.Environment (not the gateway's own)", GATEWAY),
    # ---- set by the gateway for a copy
    V("PIER_COPY_SECRET", "text", "(none: a standalone container)", "the secret a copy answers to; set by the "
      "gateway for each copy it starts, which then takes adapters from it", COPY),
    V("PIER_GPUS", "integer >= 0", "(every GPU it sees)", "the GPUs the copy holds (SM_NUM_GPUS, NUM_SHARD); "
      "set by the gateway", COPY),
    V("PIER_CPU_FALLBACK", "1", "(unset)", "set by the gateway: the copy asked for GPUs this host lacks and runs on "
      "CPU (--cpu-fallback)", COPY),
    V("PIER_MODEL_CACHE", "Enabled or Disabled", "Enabled", "a multi-model copy keeps its models loaded "
      "(MultiModelConfig.ModelCacheSetting); set by the gateway", COPY),
    V("PIER_MULTI_MODEL_MEMORY_MB", "MB > 0", "the instance type's memory (4096 standalone)", "what a "
      "multi-model copy's loaded models may take together", COPY),
    # ---- a copy (a model's Environment, or pier container's)
    V("PIER_HOST", "address", "0.0.0.0", "where the model server listens", COPY),
    V("PIER_MODEL_NAME", "text", "HF_MODEL_ID, else the GGUF's name", "the model name clients see", COPY),
    V("PIER_CACHE_DIR", "path", "$XDG_CACHE_HOME/pier or ~/.cache/pier", "handlers' code and environments, the "
      "CPU kernels proven per kind of model", COPY),
    V("PIER_THREADS", "integer >= 1", "(the cores it may use)", "llama.cpp's threads", COPY),
    V("PIER_PARALLEL", "integer >= 1", "8", "sequences the engine decodes at once (MAX_BATCH_SIZE); the local "
      "backend reads it from a copy's environment for its concurrency", COPY),
    V("PIER_BATCH_TOKENS", "integer >= 1", "512", "the most tokens in one forward pass (MAX_BATCH_PREFILL_TOKENS)",
      COPY),
    V("PIER_PREFIX_CACHE", "boolean", "true", "finished prompts stay cached as prefixes", COPY),
    V("PIER_PREFIX_CACHE_FLOOR_CELLS", "integer >= 0", "1/16 of the KV cache", "KV cells finished prompts may "
      "always keep", COPY),
    V("PIER_HOST_CACHE_MB", "MiB >= 0", "8192", "host memory for prefixes evicted from the KV cache; 0: none",
      COPY),
    V("PIER_FLASH_ATTENTION", "true, false or auto", "auto", "llama.cpp's flash attention (off: recomputed tokens "
      "are bit-exact)", COPY),
    V("PIER_SEPARATE_DECODE_ROWS", "boolean", "true", "decode rows in passes of their own where flash attention "
      "would tile them", COPY),
    V("PIER_ITL_BOUND", "number >= 1, or off", "2", "a step beside running streams costs at most this many "
      "decode-only steps", COPY),
    V("PIER_KV_CACHE_TYPE", "f32, f16, q8_0 or q4_0", "f16", "llama.cpp's KV cache type", COPY),
    V("PIER_KV_CACHE_MB", "MiB >= 1", "(MAX_BATCH_TOTAL_TOKENS cells)", "the KV cache's memory, sized in cells of "
      "its type", COPY),
    V("PIER_GPU_LAYERS", "integer >= 0, or all", "all", "layers offloaded to GPUs (LLAMA_ARG_N_GPU_LAYERS)", COPY),
    V("PIER_SPLIT_MODE", "none, layer or row", "layer", "how a model is split across GPUs (LLAMA_ARG_SPLIT_MODE)",
      COPY),
    V("PIER_MAIN_GPU", "integer >= 0", "0", "the GPU that holds what is not split (LLAMA_ARG_MAIN_GPU)", COPY),
    V("PIER_TENSOR_SPLIT", "shares, comma-separated", "(by memory)", "each GPU's share of the model "
      "(LLAMA_ARG_TENSOR_SPLIT)", COPY),
    V("PIER_DRAIN_SECONDS", "seconds >= 0", "25", "on SIGTERM, how long requests in flight may finish", COPY),
    V("PIER_LOG_LEVEL", "debug, info, warning, error", "info", "the model server's log level", COPY),
    V("PIER_KERNEL_PROBE_FAULTS", "family:kind (crash, hang, wrong), comma-separated", "(none)", "a drill: the "
      "kernel probe fails for these CPU kernel families (tests, rehearsals)", COPY),
    V("PIER_WORKER_PARENT", "pid", "(its parent's)", "set by a copy for its handler worker, which dies with that "
      "process", WORKER),
    V("PIER_LLAMA_CPP_DIR", "folder", "(llama-cpp-python's sdist, fetched once)", "a llama.cpp checkout whose "
      "convert_hf_to_gguf.py converts Hugging Face checkpoints", GATEWAY),
    # ---- the CLI
    V("PIER_URL", "URL", "http://127.0.0.1:8080", "the gateway the pier command talks to", CLI),
    V("PIER_GATEWAY_URL", "URL", "PIER_URL, else AWS_ENDPOINT_URL", "the gateway pier bench resolves endpoint "
      "names at", CLI),
    V("PIER_ACCESS_KEY_ID", "text", "(the state folder's key)", "the access key the pier command signs with",
      CLI),
    V("PIER_SECRET_ACCESS_KEY", "text", "(the state folder's key)", "its secret", CLI),
)
BY_NAME = {variable.name: variable for variable in VARIABLES}


def markdown() -> str:
    """docs/settings.md."""
    rows = [f"| `{v.name}` | {v.type} | {v.default} | {v.meaning} | {v.reader} |" for v in VARIABLES]
    return "\n".join([
        "# Settings",
        "",
        "Every `PIER_*` environment variable pier reads. Written from `src/pier/variables.py` by",
        "`python -m pier.variables docs/settings.md`: change the table there, not this page. Each process reads its",
        "own once, where it starts; SageMaker's and TGI's own variables (`SAGEMAKER_*`, `MAX_*`, `HF_MODEL_ID`, ...)",
        "are read as those containers read them.",
        "",
        "| variable | type | default | meaning | read by |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ])


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(markdown()) if len(sys.argv) > 1 else sys.stdout.write(markdown())
