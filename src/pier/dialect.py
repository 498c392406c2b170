"""Which dialect a request path speaks: the API whose clients call it, which decides the shape of its errors.

One table for both processes. The gateway serves the control plane at `/`, SageMaker's runtime and the OpenAI
routes under `/endpoints/{EndpointName}/` and `/v1/`, CloudWatch's CBOR protocol and pier's own routes; a copy
serves SageMaker's container contract (`/ping`, `/execution-parameters`), TGI's routes, the OpenAI routes and
llama-server's. The two sets of paths meet only at `/ping` and `/v1/`, where they speak the same dialect.
What a process does with a path it does not serve is its own business: the gateway treats it as its own
(admin only), a copy answers in TGI's shape.

Pure and imports nothing of pier: the gateway's guard, its drain and a copy's errors all ask it.
"""

from __future__ import annotations

from enum import StrEnum

# The X-Amz-Target prefixes of the two AWS services the gateway speaks besides SageMaker, and the path of
# CloudWatch's Smithy RPC v2 CBOR protocol (`POST /service/GraniteServiceVersion20100801/operation/<Op>`).
AUTOSCALING_TARGET = "AnyScaleFrontendService"
CLOUDWATCH_TARGET = "GraniteServiceVersion20100801"
CBOR_PATH = f"/service/{CLOUDWATCH_TARGET}/operation/"

LLAMA_SERVER_PATHS = ("/tokenize", "/detokenize", "/apply-template")  # llama-server's, with OpenAI's errors
SAGEMAKER_CONTAINER_PATHS = frozenset({"/ping", "/execution-parameters"})
TGI_PATHS = frozenset({"/generate", "/generate_stream", "/info", "/health", "/invocations", "/embed"})


class Dialect(StrEnum):
    CONTROL = "control"  # POST / with X-Amz-Target: AWS JSON (SageMaker, Application Auto Scaling, CloudWatch)
    RUNTIME = "runtime"  # /endpoints/{EndpointName}/invocations...: SageMaker's runtime, rest-json
    OPENAI = "openai"  # /v1/..., /endpoints/{EndpointName}/.../v1/..., llama-server's routes
    SAGEMAKER = "sagemaker"  # a copy's /ping and /execution-parameters: SageMaker's container contract
    TGI = "tgi"  # a copy's own routes (/generate, /info, ...; /invocations unless its payload says otherwise)
    CLOUDWATCH = "cloudwatch"  # CloudWatch's Smithy RPC v2 CBOR protocol
    PIER = "pier"  # pier's own routes (/pier/..., the console) and anything not named above


def dialect_of(path: str) -> Dialect:
    """The dialect of a (percent-decoded) request path."""
    if path == "/":
        return Dialect.CONTROL
    if path.startswith("/endpoints/"):
        rest = "/" + path.removeprefix("/endpoints/").partition("/")[2]
        return Dialect.OPENAI if "/v1/" in rest or rest.endswith(LLAMA_SERVER_PATHS) else Dialect.RUNTIME
    if path.startswith("/v1/") or path in LLAMA_SERVER_PATHS:
        return Dialect.OPENAI
    if path in SAGEMAKER_CONTAINER_PATHS:
        return Dialect.SAGEMAKER
    if path in TGI_PATHS:
        return Dialect.TGI
    if path.startswith(CBOR_PATH):
        return Dialect.CLOUDWATCH
    return Dialect.PIER
