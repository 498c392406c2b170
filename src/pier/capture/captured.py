"""One captured request as SageMaker writes it (a JSON line), and where its file goes. Pure.

    {"captureData": {"endpointInput": {"observedContentType": "text/csv", "mode": "INPUT", "data": "1,2",
                                       "encoding": "CSV"},
                     "endpointOutput": {...}},
     "eventMetadata": {"eventId": "...", "inferenceTime": "2024-05-01T12:00:00Z"},
     "eventVersion": "0"}

`encoding` is CSV or JSON when the observed content type is one the config's CaptureContentTypeHeader lists
(the data is then the text itself), else BASE64.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class ContentTypes:
    """CaptureContentTypeHeader: the content types captured as text, lower-cased, without parameters."""

    csv: frozenset[str] = frozenset()
    json: frozenset[str] = frozenset()

    @classmethod
    def of(cls, csv: Collection[str] = (), json: Collection[str] = ()) -> ContentTypes:
        return cls(frozenset(_media(c) for c in csv), frozenset(_media(c) for c in json))

    def encoding(self, content_type: str) -> str:
        media = _media(content_type)
        return "CSV" if media in self.csv else "JSON" if media in self.json else "BASE64"


@dataclass(frozen=True)
class Side:
    """One side of an exchange: the bytes and the content type they came with."""

    data: bytes
    content_type: str


@dataclass(frozen=True)
class Captured:
    """One sampled exchange, to be written under its endpoint and variant."""

    endpoint: str
    variant: str
    event_id: str
    inference_time: float  # epoch seconds
    input: Side | None  # None: the config captures only the output
    output: Side | None  # None: only the input
    inference_id: str | None = None


def line(captured: Captured, types: ContentTypes) -> dict[str, object]:
    """The JSON object SageMaker writes for one exchange."""
    data: dict[str, object] = {}
    if captured.input is not None:
        data["endpointInput"] = _side(captured.input, "INPUT", types)
    if captured.output is not None:
        data["endpointOutput"] = _side(captured.output, "OUTPUT", types)
    metadata: dict[str, object] = {"eventId": captured.event_id, "inferenceTime": _iso(captured.inference_time)}
    if captured.inference_id:
        metadata["inferenceId"] = captured.inference_id
    return {"captureData": data, "eventMetadata": metadata, "eventVersion": "0"}


def folder(endpoint: str, variant: str, when: float) -> str:
    """The hour's folder under the destination: <endpoint>/<variant>/yyyy/mm/dd/hh."""
    return f"{endpoint}/{variant}/{time.strftime('%Y/%m/%d/%H', time.gmtime(when))}"


def file_name(when: float, unique: str) -> str:
    """SageMaker names a file by the minute, second and millisecond it began, then a unique id."""
    stamp = time.strftime("%M-%S", time.gmtime(when))
    return f"{stamp}-{int(when * 1000) % 1000:03d}-{unique}.jsonl"


def _side(side: Side, mode: str, types: ContentTypes) -> dict[str, str]:
    encoding = types.encoding(side.content_type)
    text = None
    if encoding != "BASE64":
        try:
            text = side.data.decode("utf-8")
        except UnicodeDecodeError:  # not the text its content type claims: kept whole, as bytes
            encoding = "BASE64"
    if text is None:
        text = base64.b64encode(side.data).decode("ascii")
    return {"observedContentType": side.content_type, "mode": mode, "data": text, "encoding": encoding}


def _iso(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()
