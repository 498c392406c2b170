"""DataProcessing (pure): InputFilter on each record before it is sent, then JoinSource (the input record joined
with its output) and OutputFilter on what is written. JSON records (application/json, jsonlines) are read as
JSON; CSV records (text/csv) as an array of their fields, as SageMaker reads them for these filters."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

from pier.transform.jsonpath import JsonPath, JsonPathError, parse


class ProcessingError(ValueError):
    """A record the filters or the join cannot be applied to: the job fails with this message."""


@dataclass(frozen=True)
class Processing:
    input_filter: JsonPath | None = None
    output_filter: JsonPath | None = None
    join: bool = False
    csv: bool = False  # records are CSV lines, else JSON

    @classmethod
    def of(cls, data_processing: dict[str, Any] | None, content_type: str | None) -> Processing:
        given = data_processing or {}
        return cls(_path(given.get("InputFilter")), _path(given.get("OutputFilter")),
                   given.get("JoinSource") == "Input", "csv" in (content_type or "").lower())

    @property
    def idle(self) -> bool:
        return self.input_filter is None and self.output_filter is None and not self.join

    def prepare(self, record: bytes) -> bytes:
        """The record as the model gets it."""
        if self.input_filter is None:
            return record
        return self._write(self._apply(self.input_filter, self._read(record, "input record")))

    def finish(self, records: tuple[bytes, ...], output: bytes) -> bytes:
        """What is written for a unit of `records` whose model output is `output`."""
        if self.idle:
            return output
        outputs = [output] if len(records) == 1 else [line for line in output.splitlines() if line.strip()]
        if len(outputs) != len(records):
            raise ProcessingError(f"the model answered {len(outputs)} lines for a mini-batch of {len(records)} "
                                  "records, so they cannot be joined or filtered one by one: use SingleRecord")
        return b"\n".join(self._one(record, out) for record, out in zip(records, outputs, strict=True))

    def _one(self, record: bytes, output: bytes) -> bytes:
        value = self._read(output, "model output") if self.join or self.csv else _json(output, "model output")
        if self.join:
            value = self._joined(self._read(record, "input record"), value)
        if self.output_filter is not None:
            value = self._apply(self.output_filter, value)
        return self._write(value)

    def _joined(self, source: Any, output: Any) -> Any:
        if self.csv:
            return [*source, *(output if isinstance(output, list) else [output])]
        if isinstance(source, dict):
            return {**source, "SageMakerOutput": output}
        if isinstance(source, list):
            return [*source, output]
        raise ProcessingError("JoinSource Input joins a JSON object or array record with its output; this record "
                              f"is {json.dumps(source)[:60]}")

    def _read(self, data: bytes, what: str) -> Any:
        if self.csv:
            return next(csv.reader(io.StringIO(data.decode("utf-8"))), [])
        return _json(data, what)

    def _write(self, value: Any) -> bytes:
        if self.csv:
            out = io.StringIO()
            csv.writer(out, lineterminator="").writerow(value if isinstance(value, list) else [value])
            return out.getvalue().encode()
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()

    @staticmethod
    def _apply(path: JsonPath, value: Any) -> Any:
        try:
            return path.select(value)
        except JsonPathError as error:
            raise ProcessingError(str(error)) from None


def _path(text: str | None) -> JsonPath | None:
    return None if text in (None, "") else parse(text)


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise ProcessingError(f"the {what} is not JSON ({data[:60]!r}); a filter or join on JSON needs JSON "
                              "records (ContentType application/json or application/jsonlines)") from None
