"""Every `X-Pier-*` header pier sends or answers with, in one table: its name, its way and its meaning.

Each constant below is declared by its row of `HEADERS`; every module that sends or reads one imports it from here
(tests/channel/test_headers.py fails on an "X-Pier-" string written anywhere else in src/pier). A client's own
X-Pier-* headers never reach a copy (pier.runtime.invocation sends only the gateway's), so a copy may trust them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Way = Literal["request", "response", "client"]
REQUEST: Way = "request"  # the gateway sends it to a copy
RESPONSE: Way = "response"  # a copy answers the gateway with it
CLIENT: Way = "client"  # a copy answers with it and the gateway passes it to the client


@dataclass(frozen=True)
class PierHeader:
    name: str
    way: Way
    meaning: str
    module: str  # where its values are made and read


HEADERS: dict[str, PierHeader] = {}  # by lower-case name


def _declare(name: str, way: Way, meaning: str, module: str) -> str:
    assert name.lower() not in HEADERS, f"{name} is declared twice"
    HEADERS[name.lower()] = PierHeader(name, way, meaning, module)
    return name


# The copy's secret and its limits.
COPY_SECRET_HEADER = _declare("X-Pier-Copy-Secret", REQUEST, "the secret that makes a copy answer (PIER_COPY_SECRET)",
                              "pier.channel.copy_secret")
TIMEOUT_HEADER = _declare("X-Pier-Timeout-Seconds", REQUEST, "the copy ends the request after this many seconds, a "
                          "little before the client gives up (an async invocation's InvocationTimeoutSeconds)",
                          "pier.server.middleware.request_timeout")
CONCURRENCY_HEADER = _declare("X-Pier-Concurrency", RESPONSE, "on a ready copy's /ping: the requests it takes at once",
                              "pier.channel.concurrency")
KERNELS_HEADER = _declare("X-Pier-Kernels", RESPONSE, "on a ready copy's /ping: the CPU kernels it computes with",
                          "pier.channel.unservable")
REFUSED_HEADER = _declare("X-Pier-Refused", RESPONSE, "refused before any work, loading, shutting down or full "
                          "(value: the error code): another copy may take it; without it an error is the request's "
                          "own", "pier.server.errors")

# Resumable answers.
RESUMABLE = _declare("X-Pier-Resumable", REQUEST, "frame the answer, so the gateway can resume it elsewhere",
                     "pier.channel.frames")
CONTINUE = _declare("X-Pier-Continue", REQUEST, "the body starts with this many bytes of continuation JSON",
                    "pier.channel.frames")
FRAMED = _declare("X-Pier-Frames", RESPONSE, "the body is frames (head, state, tokens, data, ...)",
                  "pier.channel.frames")

# KV_AWARE routing. Building the report checks each recent prompt against the whole cache (milliseconds on the
# copy's event loop), so a copy builds it only when asked.
KV_HELD_WANTED = _declare("X-Pier-Kv-Held-Wanted", REQUEST, "answer with X-Pier-Kv-Held", "pier.channel.kv_held")
KV_HELD = _declare("X-Pier-Kv-Held", RESPONSE, "the prefix blocks the copy's prefix cache holds now",
                   "pier.channel.kv_held")

# What the call is for: the name the client sees and the adapter it runs under.
MODEL_NAME_HEADER = _declare("X-Pier-Model-Name", REQUEST, "the model name an OpenAI answer gives when the request "
                             "names none: the inference component's or the endpoint's", "pier.served_name")
ADAPTER_HEADER = _declare("X-Pier-Adapter", REQUEST, "the LoRA adapter the request runs under: its component's name",
                          "pier.control.adapters, pier.server.middleware.adapter_requests")
ADAPTER_FILE_HEADER = _declare("X-Pier-Adapter-File", REQUEST, "the adapter's GGUF file, as the copy reads it",
                               "pier.control.adapters, pier.server.middleware.adapter_requests")
ADAPTER_SCALE_HEADER = _declare("X-Pier-Adapter-Scale", REQUEST, "the adapter's scale (PIER_LORA_SCALE, default 1)",
                                "pier.control.adapters, pier.server.middleware.adapter_requests")

# A multi-model copy's report of how it found the TargetModel (pier.multi_model.CacheReport): the AWS/SageMaker
# metrics ModelCacheHit, ModelLoadingWaitTime, ModelUnloadingTime, ModelDownloadingTime and LoadedModelCount.
MODEL_CACHE_HIT = _declare("X-Pier-Model-Cache-Hit", RESPONSE, "1: the model was loaded already; 0: it was not",
                           "pier.multi_model")
MODEL_LOADING_WAIT = _declare("X-Pier-Model-Loading-Wait-Us", RESPONSE, "microseconds the request waited for its "
                              "model (download, unloads, load)", "pier.multi_model")
MODEL_UNLOADING = _declare("X-Pier-Model-Unloading-Us", RESPONSE, "microseconds spent unloading the models evicted "
                           "to make room", "pier.multi_model")
MODEL_DOWNLOADING = _declare("X-Pier-Model-Downloading-Us", RESPONSE, "microseconds spent bringing the model's files "
                             "into place", "pier.multi_model")
LOADED_MODELS = _declare("X-Pier-Loaded-Models", RESPONSE, "the copy's models after the answer, comma-separated",
                         "pier.multi_model")

# To the client.
SCHEMA_CHECK_HEADER = _declare("X-Pier-Schema-Check", CLIENT, "TGI /generate: what the check of the generated text "
                               "against its JSON schema found (JSON)", "pier.server.flavors.tgi.views")
