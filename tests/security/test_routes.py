"""Which family each path is in (pure): what it needs, and the shape of its errors."""

from __future__ import annotations

import pytest

from pier.security.routes import Family, Route, operation_of, route_of


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/ping", Route(Family.OPEN)),
        ("/console", Route(Family.OPEN)),  # the console's page and assets: it sends the key on its API calls
        ("/console/", Route(Family.OPEN)),
        ("/console/assets/index-abc.js", Route(Family.OPEN)),
        ("/consoles", Route(Family.PIER)),
        ("/", Route(Family.CONTROL)),
        ("/endpoints/e1/invocations", Route(Family.RUNTIME, endpoint="e1")),
        ("/endpoints/e1/invocations-response-stream", Route(Family.RUNTIME, endpoint="e1")),
        ("/endpoints/e1/v1/chat/completions", Route(Family.OPENAI, endpoint="e1")),
        ("/endpoints/e1/openai/v1/chat/completions", Route(Family.OPENAI, endpoint="e1")),
        ("/endpoints/e1/tokenize", Route(Family.OPENAI, endpoint="e1")),  # llama-server's: OpenAI's errors
        ("/endpoints/e1/inference-components/c/openai/apply-template", Route(Family.OPENAI, endpoint="e1")),
        ("/tokenize", Route(Family.PIER)),  # only under an endpoint
        ("/v1/chat/completions", Route(Family.OPENAI, model_in_body=True)),
        ("/v1/completions", Route(Family.OPENAI, model_in_body=True)),
        ("/v1/models", Route(Family.OPENAI)),
        ("/pier/copies", Route(Family.PIER)),
        ("/pier/copies/c-1/logs", Route(Family.PIER)),
        ("/docs", Route(Family.PIER)),  # anything unnamed needs admin
        ("/openapi.json", Route(Family.PIER)),
        ("//", Route(Family.PIER)),
        ("/ping/", Route(Family.PIER)),
    ],
)
def test_route_of(path: str, route: Route) -> None:
    assert route_of(path) == route


@pytest.mark.parametrize(
    ("method", "path", "target", "operation"),
    [
        ("POST", "/", "SageMaker.CreateModel", "sagemaker:CreateModel"),
        ("POST", "/", None, "sagemaker:UnknownOperation"),
        ("POST", "/endpoints/e/invocations", None, "sagemaker:InvokeEndpoint"),
        ("POST", "/endpoints/e/invocations-response-stream", None, "sagemaker:InvokeEndpointWithResponseStream"),
        ("POST", "/endpoints/e/async-invocations", None, "sagemaker:InvokeEndpointAsync"),
        ("GET", "/pier/copies", None, "GET /pier/copies"),
    ],
)
def test_operation_of(method: str, path: str, target: str | None, operation: str) -> None:
    assert operation_of(method, path, target) == operation
