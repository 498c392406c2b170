"""Which dialect each path speaks (pure): one table for the gateway's paths and a copy's."""

from __future__ import annotations

import pytest

from pier.dialect import Dialect, dialect_of


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        # the gateway's
        ("/", Dialect.CONTROL),
        ("/endpoints/e1/invocations", Dialect.RUNTIME),
        ("/endpoints/e1/invocations-response-stream", Dialect.RUNTIME),
        ("/endpoints/e1/async-invocations", Dialect.RUNTIME),
        ("/endpoints/e1", Dialect.RUNTIME),
        ("/endpoints/e1/v1/chat/completions", Dialect.OPENAI),
        ("/endpoints/e1/openai/v1/chat/completions", Dialect.OPENAI),
        ("/endpoints/e1/tokenize", Dialect.OPENAI),  # llama-server's: OpenAI's errors
        ("/endpoints/e1/inference-components/c/openai/apply-template", Dialect.OPENAI),
        ("/endpoints/v1/invocations", Dialect.RUNTIME),  # an endpoint named v1
        ("/service/GraniteServiceVersion20100801/operation/PutMetricData", Dialect.CLOUDWATCH),
        ("/pier/copies", Dialect.PIER),
        ("/console/assets/index-abc.js", Dialect.PIER),
        ("/docs", Dialect.PIER),
        ("//", Dialect.PIER),
        # both
        ("/v1/chat/completions", Dialect.OPENAI),
        ("/v1/completions", Dialect.OPENAI),
        ("/v1/models", Dialect.OPENAI),
        ("/v1/embeddings", Dialect.OPENAI),
        ("/ping", Dialect.SAGEMAKER),
        # a copy's
        ("/execution-parameters", Dialect.SAGEMAKER),
        ("/tokenize", Dialect.OPENAI),
        ("/detokenize", Dialect.OPENAI),
        ("/apply-template", Dialect.OPENAI),
        ("/generate", Dialect.TGI),
        ("/generate_stream", Dialect.TGI),
        ("/info", Dialect.TGI),
        ("/health", Dialect.TGI),
        ("/invocations", Dialect.TGI),
        ("/ping/", Dialect.PIER),
        ("/anything", Dialect.PIER),
    ],
)
def test_dialect_of(path: str, dialect: Dialect) -> None:
    assert dialect_of(path) is dialect
