from __future__ import annotations

import pytest

from pier.bench.eventstream_decoder import EventStreamDecoder
from pier.bench.request_record import RequestFailed
from tests.bench.eventstream_frames import frame, model_stream_error, payload_part


def test_payload_parts_are_joined_across_frames_and_reads() -> None:
    stream = (
        payload_part(b'data: {"a"')
        + payload_part(b": 1}\n\n")
        + frame({":message-type": "event", ":event-type": "Other"}, b"x")
    )
    decoder = EventStreamDecoder()
    cut = len(stream) // 2 + 3  # a read boundary inside a frame
    assert decoder.feed(stream[:cut]) + decoder.feed(stream[cut:]) == b'data: {"a": 1}\n\n'


def test_exception_frame_fails_with_its_type_and_code() -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(RequestFailed) as failure:
        decoder.feed(payload_part(b"data: x\n\n") + model_stream_error("too slow"))
    assert failure.value.code == "ModelStreamError:ModelInvocationTimeExceeded"
    assert failure.value.message == "too slow"
