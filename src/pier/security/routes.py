"""Which family of the gateway's API a path belongs to: it decides what a caller needs, and the shape errors
take (AWS JSON 1.1 for the control plane, rest-json for the runtime, OpenAI's for /v1)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pier.autoscaling.wire import AUTOSCALING_TARGET, CBOR_PATH, CLOUDWATCH_TARGET
from pier.security.credential_scope import APPLICATION_AUTOSCALING, MONITORING, SAGEMAKER


class Family(StrEnum):
    OPEN = "open"  # health checks and the console's static files: no credentials needed
    CONTROL = "control"  # POST / with X-Amz-Target: SageMaker.<Operation>
    RUNTIME = "runtime"  # /endpoints/{EndpointName}/invocations[-response-stream]
    OPENAI = "openai"  # /v1/..., /endpoints/{EndpointName}/.../v1/... and .../tokenize (llama-server's)
    PIER = "pier"  # /pier/copies and anything not named above: admin only, so a new route is never open by mistake


OPEN_PATHS = frozenset({"/ping"})
LLAMA_SERVER_ROUTES = ("/tokenize", "/detokenize", "/apply-template")  # under an endpoint: pier.runtime.routes
# The web console's page and assets hold no data: the page asks for a key and sends it with every API call, so a
# browser, which cannot add a bearer token to a page load, can open it. Everything it shows comes from guarded routes.
CONSOLE_PREFIX = "/console"


@dataclass(frozen=True)
class Route:
    family: Family
    endpoint: str | None = None  # the endpoint the path names
    model_in_body: bool = False  # the endpoint is the body's `model` ("ENDPOINT" or "ENDPOINT/COMPONENT")

    @property
    def invokes(self) -> bool:
        return self.family in {Family.RUNTIME, Family.OPENAI}


def route_of(path: str) -> Route:
    """The family of a (percent-decoded) request path."""
    if path in OPEN_PATHS or path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"):
        return Route(Family.OPEN)
    if path == "/":
        return Route(Family.CONTROL)
    if path.startswith("/endpoints/"):
        endpoint, _, rest = path.removeprefix("/endpoints/").partition("/")
        openai = "/v1/" in f"/{rest}" or f"/{rest}".endswith(LLAMA_SERVER_ROUTES)  # llama-server's: OpenAI's errors
        family = Family.OPENAI if openai else Family.RUNTIME
        return Route(family, endpoint=endpoint)
    if path.startswith("/v1/"):
        return Route(Family.OPENAI, model_in_body=path != "/v1/models")
    return Route(Family.PIER)


def operation_of(method: str, path: str, target: str | None) -> str:
    """A name for the call in audit lines and AccessDenied messages, as close to AWS's as there is."""
    route = route_of(path)
    if route.family is Family.CONTROL:
        service, _, operation = (target or "").partition(".")
        return f"{service.lower() or 'sagemaker'}:{operation or 'UnknownOperation'}"
    if route.family is Family.RUNTIME:
        if path.endswith("/async-invocations"):
            return "sagemaker:InvokeEndpointAsync"
        streaming = path.endswith("-response-stream")
        return "sagemaker:InvokeEndpointWithResponseStream" if streaming else "sagemaker:InvokeEndpoint"
    return f"{method} {path}"


def signing_service(path: str, target: str | None, content_type: str | None) -> str:
    """The service a SigV4 signature for this call must be scoped to: what botocore signs the API as."""
    if path.startswith(CBOR_PATH):
        return MONITORING
    if path == "/":
        prefix = (target or "").partition(".")[0]
        if prefix == AUTOSCALING_TARGET:
            return APPLICATION_AUTOSCALING
        if prefix == CLOUDWATCH_TARGET:
            return MONITORING
        if not target and (content_type or "").startswith("application/x-www-form-urlencoded"):
            return MONITORING  # CloudWatch's query protocol (older botocore)
    return SAGEMAKER  # the SageMaker control plane and runtime, the OpenAI routes and pier's own (the CLI signs so)
