"""The control plane's errors, each carrying the `__type` SageMaker sends, so boto3 raises the same
exception classes (and its waiters decide the same way) against pier as against AWS."""

from __future__ import annotations

from pier.errors import PierError, Wire


def _aws(code: str) -> Wire:
    """SageMaker's control plane answers every modelled error with HTTP 400 and its `__type`."""
    return Wire(400, "invalid_request_error", 400, "validation", 400, code)


class ControlError(PierError):
    """Answered as HTTP 400 with `{"__type": wire.sagemaker_code, "message": message}`."""

    wire = _aws("ValidationException")


class ValidationError(ControlError):
    """The request is wrong or names something that does not exist (SageMaker uses this type for both)."""

    code = "validation"


class ResourceLimitExceeded(ControlError):
    wire = _aws("ResourceLimitExceeded")
    code = "resource_limit_exceeded"


class ResourceInUse(ControlError):
    wire = _aws("ResourceInUse")
    code = "resource_in_use"


class ResourceNotFound(ControlError):
    wire = _aws("ResourceNotFound")
    code = "resource_not_found"


class ConflictError(ControlError):
    wire = _aws("ConflictException")
    code = "conflict"


class UnknownOperation(ControlError):
    wire = _aws("UnknownOperationException")
    code = "unknown_operation"


class SerializationError(ControlError):
    wire = _aws("SerializationException")
    code = "serialization"


def not_found(kind: str, name: str) -> ValidationError:
    """SageMaker's wording, which boto3's `endpoint_deleted` waiter waits for (as a ValidationException)."""
    return ValidationError(f'Could not find {kind} "{name}".')


def already_exists(kind: str, arn: str) -> ValidationError:
    return ValidationError(f'Cannot create already existing {kind} "{arn}".')
