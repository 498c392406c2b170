"""The base of every SageMaker request shape pier reads (pier.control.shapes, pier.control.data_capture): fields
named as on the wire, the ones pier does not act on kept so that Describe* echoes what was sent, frozen."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Shape(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    def wire(self) -> dict[str, Any]:
        """As SageMaker would echo it back: no nulls."""
        return self.model_dump(mode="json", exclude_none=True)
