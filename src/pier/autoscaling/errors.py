"""The errors of Application Auto Scaling and CloudWatch as boto3 knows them: each carries its `__type` in its
wire fields (HTTP 400, as both services answer modelled errors); CloudWatch's also the query-compatible code
botocore reads from `x-amzn-query-error`."""

from __future__ import annotations

from pier.errors import PierError, Wire


def _aws(code: str, status: int = 400) -> Wire:
    return Wire(status, "invalid_request_error", status, "validation", status, code)


class ScalingError(PierError):
    """An Application Auto Scaling or CloudWatch request pier refuses; `query_code` is CloudWatch's older name."""

    code = "autoscaling"
    wire = _aws("ValidationException")
    query_code = ""


class ScalingValidation(ScalingError):
    code = "validation"


class ObjectNotFound(ScalingError):
    code = "object_not_found"
    wire = _aws("ObjectNotFoundException")


class UnknownOperation(ScalingError):
    code = "unknown_operation"
    wire = _aws("UnknownOperationException")


class InvalidParameterValue(ScalingError):
    """CloudWatch's: a parameter it cannot take."""

    code = "invalid_parameter_value"
    wire = _aws("InvalidParameterValueException")
    query_code = "InvalidParameterValue"


class InvalidParameterCombination(ScalingError):
    """CloudWatch's: parameters that cannot be given together."""

    code = "invalid_parameter_combination"
    wire = _aws("InvalidParameterCombinationException")
    query_code = "InvalidParameterCombination"


class MissingParameter(ScalingError):
    code = "missing_parameter"
    wire = _aws("MissingRequiredParameterException")
    query_code = "MissingParameter"


class ResourceNotFound(ScalingError):
    code = "resource_not_found"
    wire = _aws("ResourceNotFoundException", 404)
    query_code = "ResourceNotFound"
