"""One transform job's records through its copies: every input object read and cut into units, each unit not
yet answered sent, in a free turn (`Turns`), through the runtime's attempt loop (pier.runtime.attempts: which copy,
a full copy, retries on another copy and their backoff, within the job's ModelClientConfig), its output committed
to the store as it arrives, and an object's output written whole once all its units are answered, in input order.

Objects are read one after another but their units overlap: the next object's units queue behind the last
one's, so the copies never wait for an object to be written. Outputs are kept in the store, not in memory, so a
job of any size needs memory for the objects in flight only."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from pier.channel.headers import TIMEOUT_HEADER
from pier.runtime.attempts import Call, Declined, Forwarder, RetryBudget, Spent, Target, send_retried
from pier.transform import job_objects
from pier.transform import units as cutting
from pier.transform.job import JobRecord, Settings
from pier.transform.job_objects import LocationError
from pier.transform.processing import ProcessingError
from pier.transform.transform_store import ObjectRow, TransformStore
from pier.transform.turns import CopiesFailed, Turns
from pier.transform.units import RecordError, Unit

log = logging.getLogger("pier.transform")

DEFAULT_TIMEOUT_S = 600.0  # ModelClientConfig.InvocationsTimeoutInSeconds' default
DEFAULT_RETRIES = 3  # ModelClientConfig.InvocationsMaxRetries' default
TIMEOUT_SETTING = "the job's ModelClientConfig.InvocationsTimeoutInSeconds (600 when not given)"


class JobFailed(Exception):
    """Why the job failed, as its FailureReason says it."""


@dataclass
class _Object:
    row: ObjectRow
    units: list[Unit]
    left: int  # units not answered yet


@dataclass
class JobRun:
    job: JobRecord
    settings: Settings
    store: TransformStore
    turns: Turns
    forwarder: Forwarder  # the gateway's: its admission, its client to copies, its stop()
    senders: int  # records in flight at most (MaxConcurrentTransforms, or every parallel sequence)
    on_started: Callable[[], None] = lambda: None
    _queue: asyncio.Queue[tuple[_Object, Unit]] = field(default_factory=lambda: asyncio.Queue(maxsize=1))

    async def run(self) -> None:
        try:
            await self._run()
        except (RecordError, ProcessingError, LocationError, CopiesFailed) as error:
            raise JobFailed(str(error)) from None

    async def _run(self) -> None:
        if not self.store.objects(self.job.name):
            sources = await asyncio.to_thread(job_objects.inputs, self.settings.input_url, self.settings.data_type)
            for source in sources:  # an output that cannot be written fails the job before any record is sent
                job_objects.output_url(self.settings.output_url, source.relative)
            self.store.add_objects(self.job.name, [(s.url, s.relative) for s in sources])
        await self._first_copy()
        self.on_started()
        senders = [asyncio.create_task(self._send_loop(), name=f"transform {self.job.name}")
                   for _ in range(self.senders)]
        try:
            feeding = asyncio.create_task(self._feed())
            await _first_failure([feeding, *senders], until=feeding)
            await _first_failure(senders, until=asyncio.create_task(self._queue.join()))
        finally:
            for task in senders:
                task.cancel()
            await asyncio.wait(senders, timeout=10)  # bounded: a stop never waits on a sender for long

    async def _first_copy(self) -> None:
        while not self.turns.ready():
            self.turns.check()  # raises CopiesFailed when every copy gave up
            await asyncio.sleep(0.25)

    async def _feed(self) -> None:
        for row in self.store.objects(self.job.name):
            if row.done:
                continue
            data = await asyncio.to_thread(job_objects.read, row.url)
            units = await asyncio.to_thread(self._cut, row, data)
            self.store.cut(self.job.name, row.url, len(units), sum(len(u.records) for u in units))
            answered = self.store.answered(self.job.name, row.url)
            item = _Object(row, units, sum(1 for u in units if u.index not in answered))
            if item.left == 0:
                await self._write(item)
            for unit in units:
                if unit.index not in answered:
                    await self._queue.put((item, unit))

    def _cut(self, row: ObjectRow, data: bytes) -> list[Unit]:
        try:
            found = cutting.split(cutting.decompress(data, self.settings.compression), self.settings.split_type)
            return cutting.units(found, self.settings.strategy, self.settings.max_payload_mb)
        except RecordError as error:
            raise RecordError(f"{row.relative}: {error}") from None

    async def _send_loop(self) -> None:
        while True:
            item, unit = await self._queue.get()
            try:
                output = await self._answer(item.row, unit)
                self.store.answer(self.job.name, item.row.url, unit.index, output)
                item.left -= 1
                if item.left == 0:
                    await self._write(item)
            finally:
                self._queue.task_done()

    async def _answer(self, row: ObjectRow, unit: Unit) -> bytes:
        processing = self.settings.processing
        body = b"\n".join(processing.prepare(r) for r in unit.records) if unit.records else b""
        output = await self._invoke(row, unit, body)
        try:
            return processing.finish(unit.records, output)
        except ProcessingError as error:
            raise ProcessingError(f"{_where(row, unit)}: {error}") from None

    async def _invoke(self, row: ObjectRow, unit: Unit, body: bytes) -> bytes:
        config = self.job.request.get("ModelClientConfig") or {}
        retries = config.get("InvocationsMaxRetries", DEFAULT_RETRIES)
        timeout = float(config.get("InvocationsTimeoutInSeconds", DEFAULT_TIMEOUT_S))
        # The copy is told the job's limit: its own SAGEMAKER_MODEL_SERVER_TIMEOUT (60 s, for real-time clients)
        # would cut a record short that the job allows (600 s by default, as on AWS).
        headers = {"Content-Type": self.settings.content_type or "application/octet-stream",
                   TIMEOUT_HEADER: f"{timeout:g}", **({"Accept": self.settings.accept} if self.settings.accept else {})}
        endpoint = self.job.endpoint_name

        def fresh() -> Call:  # each try on the copies of now, with the whole limit
            copies = self.turns.check()
            now = asyncio.get_running_loop().time()
            return Call(endpoint, Target.of(endpoint, copies), "/invocations", body, headers, (), now + timeout,
                        timeout, deadline_setting=TIMEOUT_SETTING)

        async with self.turns.turn():
            try:
                return await send_retried(self.forwarder, fresh, RetryBudget(retries), what=_where(row, unit))
            except Declined as error:
                raise JobFailed(f"{_where(row, unit)}: {error}{_hint(self.settings, unit)}") from None
            except Spent as error:
                raise JobFailed(f"{_where(row, unit)} {error}") from None

    async def _write(self, item: _Object) -> None:
        answered = self.store.answered(self.job.name, item.row.url)
        outputs = [answered[u.index] for u in item.units]
        data = cutting.assemble(outputs, self.settings.assemble_with)
        target = job_objects.output_url(self.settings.output_url, item.row.relative)
        owner = f"transform job {self.job.name.lower()}: {item.row.url}"  # job names are unique, never reused
        await asyncio.to_thread(functools.partial(job_objects.write, target, data, self.settings.kms_key, owner=owner))
        self.store.written(self.job.name, item.row.url)
        log.info("transform job %s wrote %s (%d units)", self.job.name, target, len(item.units))


async def _first_failure(tasks: list[asyncio.Task[None]], *, until: asyncio.Future[None]) -> None:
    """Wait for `until`; the first of `tasks` to fail first fails the wait."""
    watched = {until, *tasks}
    while not until.done():
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None:
                until.cancel()
                raise task.exception()  # type: ignore[misc]
        watched -= done
    until.result()


def _hint(settings: Settings, unit: Unit) -> str:
    """What to change when a refused request held several JSON lines: pier's model server reads one request a
    body, so a mini-batch (MultiRecord) or a whole object of lines (SplitType None) is refused as invalid JSON."""
    if len(unit.records) > 1:
        return (f" (this request joined {len(unit.records)} records with newlines, as BatchStrategy MultiRecord "
                "does; pier's model server reads one request a body: use BatchStrategy SingleRecord, its continuous "
                "batching is the batching)")
    if settings.split_type == "None" and unit.records and b"\n" in unit.records[0].strip():
        return (" (this request was the whole object, as SplitType None sends it; to send each line as a request, "
                "give TransformInput SplitType Line)")
    return ""


def _where(row: ObjectRow, unit: Unit) -> str:
    return f"{row.relative}, unit {unit.index + 1}"
