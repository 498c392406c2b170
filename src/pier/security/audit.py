"""One line per control-plane call (and per refusal anywhere), on the `pier.audit` logger:

    audit principal=alice operation=sagemaker:CreateModel resource=my-model outcome=200 client=127.0.0.1

Never a secret: the principal is a key's name, the resource a name from the body.
"""

from __future__ import annotations

import json
import logging
import re

from pier.dialect import Dialect, dialect_of

log = logging.getLogger("pier.audit")

# The name a control-plane call acts on, most specific first (CreateEndpoint names a config too).
RESOURCE_FIELDS = ("InferenceComponentName", "EndpointName", "EndpointConfigName", "ModelName")
UNSAFE = re.compile(r"[^A-Za-z0-9_.:/@-]")  # a value that could forge a second line or field is defused
MAX_FIELD = 128


def audit(principal: str, operation: str, resource: str, outcome: str, client: str) -> None:
    log.info("audit principal=%s operation=%s resource=%s outcome=%s client=%s", _safe(principal), _safe(operation),
             _safe(resource), _safe(outcome), _safe(client))


def operation_of(method: str, path: str, target: str | None) -> str:
    """A name for the call in audit lines and AccessDenied messages, as close to AWS's as there is."""
    dialect = dialect_of(path)
    if dialect is Dialect.CONTROL:
        service, _, operation = (target or "").partition(".")
        return f"{service.lower() or 'sagemaker'}:{operation or 'UnknownOperation'}"
    if dialect is Dialect.RUNTIME:
        if path.endswith("/async-invocations"):
            return "sagemaker:InvokeEndpointAsync"
        streaming = path.endswith("-response-stream")
        return "sagemaker:InvokeEndpointWithResponseStream" if streaming else "sagemaker:InvokeEndpoint"
    return f"{method} {path}"


def resource_of(body: bytes | None) -> str:
    """The name in a control-plane body, or "-"."""
    try:
        document = json.loads(body or b"")
    except (ValueError, RecursionError):  # too deeply nested: the control plane answers it; the audit says "-"
        return "-"
    if not isinstance(document, dict):
        return "-"
    return next((str(document[name]) for name in RESOURCE_FIELDS if isinstance(document.get(name), str)), "-")


def _safe(value: str) -> str:
    return UNSAFE.sub("?", value.replace(" ", "_"))[:MAX_FIELD] or "-"
