"""The control plane's errors, each carrying the `__type` SageMaker sends, so boto3 raises the same
exception classes (and its waiters decide the same way) against pier as against AWS."""

from __future__ import annotations

from pier.errors import PierError


class ControlError(PierError):
    """Answered as HTTP 400 with `{"__type": aws_type, "message": message}`."""

    aws_type = "ValidationException"
    status = 400


class ValidationError(ControlError):
    """The request is wrong or names something that does not exist (SageMaker uses this type for both)."""

    code = "validation"


class ResourceLimitExceeded(ControlError):
    aws_type = "ResourceLimitExceeded"
    code = "resource_limit_exceeded"


class ResourceInUse(ControlError):
    aws_type = "ResourceInUse"
    code = "resource_in_use"


class ResourceNotFound(ControlError):
    aws_type = "ResourceNotFound"
    code = "resource_not_found"


class ConflictError(ControlError):
    aws_type = "ConflictException"
    code = "conflict"


class UnknownOperation(ControlError):
    aws_type = "UnknownOperationException"
    code = "unknown_operation"


class SerializationError(ControlError):
    aws_type = "SerializationException"
    code = "serialization"


def not_found(kind: str, name: str) -> ValidationError:
    """SageMaker's wording, which boto3's `endpoint_deleted` waiter waits for (as a ValidationException)."""
    return ValidationError(f'Could not find {kind} "{name}".')


def already_exists(kind: str, arn: str) -> ValidationError:
    return ValidationError(f'Cannot create already existing {kind} "{arn}".')
