"""The errors an invocation can end with, answered in the SageMaker runtime's dialect or OpenAI's
(pier.error_bodies). ModelError's extra members ride in the SageMaker body under their modelled names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from pier.deadline import Limit, StreamClock
from pier.dialect import Dialect
from pier.error_bodies import AMZ_REQUEST_ID, render
from pier.errors import (
    GenerationFailed,
    InvalidRequest,
    NotReady,
    Overloaded,
    PierError,
    Wire,
)

REQUEST_ID = AMZ_REQUEST_ID


class InvocationError(PierError):
    """An invocation that ends before (or instead of) the model's answer."""


class InternalFailure(InvocationError):
    code = "internal_error"


class InvalidInvocation(InvocationError, InvalidRequest):
    """SageMaker's ValidationError: retrying the same request fails again."""

    wire = InvalidRequest.wire


class ComponentRequired(InvalidInvocation):
    """An endpoint that hosts inference components, invoked without naming one."""


class PayloadTooLarge(InvalidInvocation):
    code = "request_too_large"
    wire = Wire.of_status(413)


class EndpointNotFound(InvalidInvocation):
    code = "model_not_found"
    wire = InvalidRequest.wire.with_status(404)

    def __init__(self, endpoint: str, account: str) -> None:
        # boto3 users match on this exact sentence, as SageMaker words it.
        super().__init__(f"Endpoint {endpoint} of account {account} not found.")


class Throttled(InvocationError, Overloaded):
    """Too many requests for this component right now: ThrottlingException with HTTP 429 on the SageMaker runtime
    (botocore retries it by its status in legacy mode and by its code in standard mode, then raises a ClientError
    whose Error.Code is ThrottlingException), 429 with Retry-After on OpenAI routes. Never reached a copy."""

    wire = Overloaded.wire


class ModelNotReady(InvocationError, NotReady):
    """Copies exist but are still loading the model."""

    wire = NotReady.wire


class ServiceUnavailable(InvocationError):
    """No copy can take the request (none placed, all restarting or failed, or none reachable)."""

    code = "service_unavailable"
    wire = Wire(503, "service_unavailable_error", 503, "unavailable", 503, "ServiceUnavailable")


class ModelError(InvocationError, GenerationFailed):
    """The copy answered with an error status, ran past the deadline (original status 0, as SageMaker
    reports a timeout) or dropped the connection."""

    code = "model_error"
    wire = GenerationFailed.wire.with_status(502)

    def __init__(self, message: str, *, original_status: int, original_message: str, log_stream_arn: str,
                 openai_status: int | None = None) -> None:
        super().__init__(message)
        self.original_status = original_status
        self.original_message = original_message
        self.log_stream_arn = log_stream_arn
        if openai_status is not None:
            self.wire = self.wire.with_status(openai_status)

    def members(self) -> dict[str, Any]:
        return {
            "OriginalStatusCode": self.original_status, "OriginalMessage": self.original_message,
            "LogStreamArn": self.log_stream_arn,
        }


TOTAL_SETTING = "PIER_STREAM_TIMEOUT_SECONDS"


@dataclass(frozen=True)
class Origin:
    """Which copy an answer came from, for ModelError's message and LogStreamArn."""

    endpoint: str
    variant: str
    copy_id: str
    region: str
    account: str

    @property
    def log_stream_arn(self) -> str:
        return (
            f"arn:aws:logs:{self.region}:{self.account}:log-group:/aws/sagemaker/Endpoints/{self.endpoint}"
            f":log-stream:{self.variant}/{self.copy_id}"
        )

    def _error(self, status: int, original: str, openai_status: int | None = None) -> ModelError:
        kind = "client" if 400 <= status < 500 else "server"
        message = (
            f'Received {kind} error ({status}) from primary with message "{original}". See the log of copy '
            f"{self.copy_id} of endpoint {self.endpoint} for more information."
        )
        return ModelError(message, original_status=status, original_message=original,
                          log_stream_arn=self.log_stream_arn, openai_status=openai_status)

    def answered(self, status: int, body: bytes) -> ModelError:
        """The copy answered `status` with `body`."""
        return self._error(status, body.decode("utf-8", "replace"))

    def timed_out(self, deadline_s: float, setting: str | None = None) -> ModelError:
        """`setting`: what raises the deadline, when it is not the endpoint's (an asynchronous request's own)."""
        # SageMaker reports a model that runs out of time as status 0.
        advice = (f"or raise {setting}" if setting else
                  "use the streaming route, or raise the endpoint's invocation deadline")
        return self._error(0, (
            f"Your invocation timed out: the model did not answer within {deadline_s:.1f} s, and it was stopped "
            f"so that this error reaches you before your client gives up. Ask for fewer tokens, send a shorter "
            f"prompt, {advice}."
        ), openai_status=424)

    def stream_timed_out(self, limit: Limit, clock: StreamClock, setting: str) -> ModelError:
        """A stream ended at `clock`'s `limit`; `setting` is the environment variable that sets `idle_s`."""
        if limit is Limit.TOTAL:
            why = (f"the stream was still running after {clock.total_s or 0.0:.1f} s, the total "
                   f"{TOTAL_SETTING} allows. Raise {TOTAL_SETTING} in the gateway's environment (unset, a stream "
                   "has no total bound), or ask for fewer tokens.")
        elif limit is Limit.FIRST_PART:
            why = (f"it sent no first part within {clock.idle_s:.1f} s of the request's arrival. {setting} bounds "
                   "the wait for the first part and each silence between parts (a little under its value); raise "
                   "it in the gateway's environment, or send a shorter prompt.")
        else:
            why = (f"it sent nothing for {clock.idle_s:.1f} s after its last part. {setting} bounds each silence "
                   "between parts (a little under its value); raise it in the gateway's environment.")
        return self._error(0, f"Your model did not complete sending the inference response in the allotted time: "
                              f"{why}", openai_status=424)

    def broken(self, error: BaseException) -> ModelError:
        return self._error(0, (
            f"The connection to copy {self.copy_id} broke before its answer was complete ({type(error).__name__}: "
            f"{error}); the copy may have crashed and is being restarted. Retry the request."
        ))


def as_invocation_error(error: BaseException) -> InvocationError:
    if isinstance(error, InvocationError):
        return error
    if isinstance(error, PierError) and error.wire.sagemaker_code == ServiceUnavailable.wire.sagemaker_code:
        return ServiceUnavailable(error.message)  # the gateway cannot answer now (its state database is away)
    return InternalFailure(
        f"Internal error in the gateway ({type(error).__name__}: {error}); this is a pier bug, please report "
        "it with the request. Retrying may work."
    )


def sagemaker_error(error: BaseException, request_id: str) -> Response:
    return render(as_invocation_error(error), Dialect.RUNTIME, request_id).response()


def openai_error(error: BaseException, request_id: str) -> Response:
    return render(as_invocation_error(error), Dialect.OPENAI, request_id).response()
