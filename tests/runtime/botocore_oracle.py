"""botocore's own event-stream decoding, exactly as boto3's invoke_endpoint_with_response_stream uses it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from botocore.eventstream import EventStream, EventStreamBuffer, EventStreamMessage
from botocore.parsers import create_parser
from botocore.session import get_session


class _Chunks:
    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks

    def stream(self) -> Iterator[bytes]:
        yield from self._chunks

    def close(self) -> None:
        pass


def raw_messages(data: bytes) -> list[EventStreamMessage]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    return list(buffer)


def runtime_events(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The parsed events of a response body; raises botocore's EventStreamError on an exception frame."""
    model = get_session().get_service_model("sagemaker-runtime")
    shape = model.operation_model("InvokeEndpointWithResponseStream").output_shape.members["Body"]
    parser = create_parser("rest-json")
    return iter(EventStream(_Chunks(chunks), shape, parser._event_stream_parser, "InvokeEndpointWithResponseStream"))
