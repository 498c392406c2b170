"""The runtime's `Tap` (pier.runtime.tap) from the stored endpoints: which requests are captured (the endpoint's
DataCaptureConfig, at its InitialSamplingPercentage) and which go to its shadow variant too, and the captured
exchanges handed to the capture writer (pier.capture), which writes them off the event loop.

A shadow variant gets each request of the production variant with the chance of its weight over the production
variant's (1.0 each by default: every request), as the weights of an endpoint config written by SageMaker's
shadow tests say how much traffic the shadow gets.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pier.capture.capture_writer import CaptureWriter, Job
from pier.capture.captured import Captured, ContentTypes, Side
from pier.control.data_capture import DataCaptureSpec
from pier.control.records import EndpointRecord
from pier.control.resource_store import ResourceStore, UnreadableRecord
from pier.runtime.tap import NOTHING, Exchanged, TapPlan


class Taps:
    def __init__(self, state: ResourceStore, writer: CaptureWriter, draw: Callable[[], float] = random.random) -> None:
        self.state = state
        self.writer = writer
        self.draw = draw

    def plan(self, endpoint: str, variant: str) -> TapPlan:
        record = self._endpoint(endpoint)
        return NOTHING if record is None else plan_of(record, variant, self.draw)

    def exchanged(self, exchange: Exchanged) -> None:
        record = self._endpoint(exchange.endpoint)
        if record is None or record.data_capture is None or not record.data_capture.enabled:
            return  # capture was turned off (UpdateEndpoint) while the request ran
        spec = record.data_capture
        self.writer.offer(Job(captured_of(record.name, exchange, spec.modes), spec.DestinationS3Uri, spec.KmsKeyId,
                              content_types(spec)))

    def close(self) -> None:
        self.writer.close()

    def _endpoint(self, name: str) -> EndpointRecord | None:
        try:
            return self.state.endpoints.get(name)
        except UnreadableRecord:
            return None


def plan_of(record: EndpointRecord, variant: str, draw: Callable[[], float]) -> TapPlan:
    """Pure but for `draw` (uniform in [0, 1)): whether this request is captured, and the shadows it goes to."""
    spec = record.data_capture
    capture = spec is not None and spec.enabled and sampled(spec.InitialSamplingPercentage, draw())
    production = record.variant(variant)
    shadows: tuple[str, ...] = ()
    if production is not None and not production.shadow:
        shadows = tuple(v.name for v in record.variants
                        if v.shadow and draw() < shadow_share(production.weight, v.weight))
    return TapPlan(capture, shadows)


def sampled(percent: int, draw: float) -> bool:
    return draw * 100 < percent


def shadow_share(production_weight: float, shadow_weight: float) -> float:
    """The share of the production variant's requests its shadow gets: the ratio of their weights, at most all."""
    if production_weight <= 0:
        return 1.0 if shadow_weight > 0 else 0.0
    return min(1.0, shadow_weight / production_weight)


def captured_of(endpoint: str, exchange: Exchanged, modes: frozenset[str]) -> Captured:
    """The exchange as captured: the sides the config's CaptureOptions ask for, under the endpoint's own name."""
    return Captured(
        endpoint=endpoint, variant=exchange.variant, event_id=exchange.request_id, inference_time=exchange.at,
        input=Side(exchange.request, exchange.request_type) if "Input" in modes else None,
        output=Side(exchange.response, exchange.response_type) if "Output" in modes else None,
        inference_id=exchange.inference_id,
    )


def content_types(spec: DataCaptureSpec) -> ContentTypes:
    header = spec.CaptureContentTypeHeader
    if header is None:
        return ContentTypes()
    return ContentTypes.of(header.CsvContentTypes or (), header.JsonContentTypes or ())
