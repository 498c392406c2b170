"""The stored resources as the control plane's operations find, change and count them: each looked up by name
(SageMaker's not-found error when it is not there), written with a new modified time and the reconciler woken,
and the copies they hold counted against this host's cap."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pier.backends.base import CopyState
from pier.control import descriptions
from pier.control.capacity import CopyCap, host_copy_cap
from pier.control.errors import ResourceLimitExceeded, ValidationError, not_found
from pier.control.fetch.folders import whole_filesystem
from pier.control.fetch.source import NoModelData, source_of
from pier.control.listing import Row, page
from pier.control.names import arn
from pier.control.records import ComponentRecord, ConfigRecord, EndpointRecord, ModelRecord, VariantRecord
from pier.control.resource_store import ResourceStore
from pier.control.shapes import ContainerSpec, ListInput
from pier.control.validation_message import parse
from pier.control.workload import Workload
from pier.state_folder.rows import BadRow

log = logging.getLogger("pier.control")

Body = dict[str, Any]


class Resources:
    """What every operation works on: the state, the copies the backend runs, the reconciler to wake, the clock."""

    def __init__(self, state: ResourceStore, *, copies: descriptions.Copies, wake: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time, copy_cap: CopyCap | None = None,
                 on_this_host: bool = True) -> None:
        self.state = state
        self.copy_cap = copy_cap or host_copy_cap()
        # An instance bigger than this host only matters when copies run here; on a cluster the backend says
        # which capacity is missing when it places the instance.
        self.on_this_host = on_this_host
        self.copies = copies
        self.wake = wake
        self.clock = clock

    def _model(self, name: str, region: str) -> ModelRecord:
        record = self.state.models.get(name)
        if record is None:
            raise not_found("model", arn("model", name, region))
        return record

    def _config(self, name: str) -> ConfigRecord:
        record = self.state.configs.get(name)
        if record is None:
            raise not_found("endpoint configuration", name)
        return record

    def _endpoint(self, name: str) -> EndpointRecord:
        record = self.state.endpoints.get(name)
        if record is None:
            raise not_found("endpoint", name)
        return record

    def _component(self, name: str) -> ComponentRecord:
        record = self.state.components.get(name)
        if record is None:
            raise not_found("inference component", name)
        return record

    def _check_copy_cap(self, delta: int) -> None:
        """More copies than this host holds are refused now, when the request asks for them. Only copies that run
        or are starting count: a copy the backend gave up on (no process) holds none of the cap."""
        wanted = 0
        for c in self.state.components.all():
            if c.status != "Deleting":
                wanted += self._holding([Workload.of_component(c.name)], c.copies, c.status)
        for e in self.state.endpoints.all():
            if e.status != "Deleting":
                variants = e.fleet_variants
                workloads = [v.workload(e.name) for v in variants if v.model is not None]
                wanted += self._holding(workloads, classic_copies(variants), e.status)
        reason = self.copy_cap.refusal(wanted, delta)
        if reason:
            raise ResourceLimitExceeded(reason)

    def _holding(self, workloads: list[Workload], wanted: int, status: str) -> int:
        """How many of the cap's copies a resource holds: a Failed one, those of its copies that still run or are
        starting (a failed fetch or start left none); any other, the copies it wants but for those that failed."""
        states = [c.state for w in workloads for c in self.copies(w)]
        if status == "Failed":
            return sum(1 for state in states if state not in (CopyState.FAILED, CopyState.STOPPED))
        return max(0, wanted - states.count(CopyState.FAILED))

    def _put_endpoint(self, record: EndpointRecord, **change: Any) -> None:
        self.state.endpoints.put(record.model_copy(update={**change, "modified": self.clock(), "failure_reason": ""}))
        self.wake()

    def _put_component(self, record: ComponentRecord, **change: Any) -> None:
        self.state.components.put(record.model_copy(update={**change, "modified": self.clock(), "failure_reason": ""}))
        self.wake()

    def _forget(self, kind: str, delete: Callable[[str], bool], name: str) -> None:
        delete(name)
        log.warning("%s %s deleted with its unreadable record", kind, name)
        self.wake()

    def _list(self, body: Body, key: str, rows: list[Row], unreadable: list[BadRow], region: str) -> Body:
        rows = rows + [descriptions.unreadable_row(row, region) for row in unreadable]
        items, token = page(rows, parse(ListInput, body))
        return {key: items, **({"NextToken": token} if token else {})}


def classic_copies(variants: Iterable[VariantRecord]) -> int:
    """A classic variant runs one copy per instance."""
    return sum(v.instance_count for v in variants if v.model is not None)


def check_source(container: ContainerSpec, artifact_url: str | None = None) -> None:
    try:
        source = source_of(container, artifact_url)
        local = source.local_path if source.scheme == "file" else None
    except NoModelData as error:
        raise ValidationError(str(error)) from None
    if local is not None:
        reason = whole_filesystem(Path(local))
        if reason:
            raise ValidationError(f"{reason}, not a model folder: give the folder that holds the model's files.")
