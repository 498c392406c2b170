"""The transform-job operations (CreateTransformJob, DescribeTransformJob, ListTransformJobs, StopTransformJob)
and the jobs' lives: each InProgress job runs as a task of the gateway; its copies are asked of the reconciler as
a classic variant of an endpoint no user can name (`endpoints()`), so they are placed, pinned, started, watched
and stopped as every copy is, and go away when the job ends. A restarted gateway resumes its InProgress jobs."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pier.backends.base import CopyStatus
from pier.channel.concurrency import copy_concurrency
from pier.control.errors import ResourceInUse, ResourceNotFound
from pier.control.extra import ExtraEndpoints
from pier.control.fetch.fetches import Fetched
from pier.control.fetch.source import ModelSource, NoModelData, source_of
from pier.control.instance_types import lookup
from pier.control.listing import Row, page
from pier.control.names import ACCOUNT
from pier.control.records import EndpointRecord, VariantRecord
from pier.control.resource_store import ResourceStore
from pier.control.shapes import ListInput
from pier.control.validation_message import parse
from pier.control.workload import Workload
from pier.runtime.attempts import Forwarder
from pier.transform import job as jobs
from pier.transform.job import RUNNING, VARIANT, JobRecord, Settings
from pier.transform.job_run import JobFailed, JobRun
from pier.transform.transform_store import TransformStore
from pier.transform.turns import Turns

log = logging.getLogger("pier.transform")

Body = dict[str, Any]
OPERATIONS = ("CreateTransformJob", "DescribeTransformJob", "ListTransformJobs", "StopTransformJob")
FETCH_POLL_S = 0.5


class Transforms:
    def __init__(self, store: TransformStore, state: ResourceStore, *, copies: Callable[[Workload], list[CopyStatus]],
                 fetch: Callable[[ModelSource], Fetched], wake: Callable[[], None], forwarder: Forwarder,
                 clock: Callable[[], float] = time.time,
                 problem: Callable[[Workload], str | None] = lambda _: None,
                 extra: ExtraEndpoints | None = None) -> None:
        self.store = store
        self.state = state
        self.copies = copies
        self.fetch = fetch
        self.wake = wake  # the reconciler: the set of wanted copies changed
        self.clock = clock
        self.problem = problem  # why the reconciler could not place a workload's copies
        self.forwarder = forwarder  # the gateway's attempt loop, which every record goes through
        self._changing = threading.Lock()  # a job's record is read and written back whole: one change at a time
        self.extra = extra or ExtraEndpoints()  # running job -> the endpoint its copies belong to (the reconciler's)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._turns: dict[str, Turns] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- the operations (on the gateway's writer thread, as every control-plane call)

    def call(self, operation: str, body: Body, region: str) -> Body:
        handler: Callable[[Body, str], Body] = {
            "CreateTransformJob": self.create, "DescribeTransformJob": self.describe,
            "ListTransformJobs": self.list_jobs, "StopTransformJob": self.stop}[operation]
        return handler(body, region)

    def create(self, body: Body, region: str) -> Body:
        jobs.check(body)
        lookup(body["TransformResources"]["InstanceType"])  # an unknown type is refused with the known ones
        model = self.state.models.get(body["ModelName"])
        if model is None:
            raise ResourceNotFound(f'Could not find model "{_arn("model", body["ModelName"], region)}".')
        container = model.request.PrimaryContainer or (model.request.Containers or [])[0]  # CreateModel insists
        container = container.model_copy(update={"Environment": {**container.Environment,
                                                                  **(body.get("Environment") or {})}})
        now = self.clock()
        record = JobRecord(name=body["TransformJobName"], arn=_arn("transform-job", body["TransformJobName"], region),
                           created=now, modified=now, request=body, container=container)
        if not self.store.insert(record):
            raise ResourceInUse(f"Transform job {record.name} already exists (names are unique regardless of "
                                "case): choose another TransformJobName.")
        self._soon(record)
        return {"TransformJobArn": record.arn}

    def describe(self, body: Body, region: str) -> Body:
        return jobs.describe(self._job(body["TransformJobName"], region))

    def list_jobs(self, body: Body, region: str) -> Body:
        query = parse(ListInput, body)
        rows = [Row(j.name, j.created, jobs.summary(j), j.modified, j.status) for j in self.store.jobs()]
        items, token = page(rows, query)
        return {"TransformJobSummaries": items, **({"NextToken": token} if token else {})}

    def stop(self, body: Body, region: str) -> Body:
        with self._changing:
            job = self._job(body["TransformJobName"], region)
            if job.status == "InProgress":
                self.store.put(job.model_copy(update={"status": "Stopping", "modified": self.clock()}))
                self._cancel_soon(job.name)
        return {}  # stopping a job that has ended changes nothing, as on SageMaker

    # ---- the reconciler's and pier's views

    def endpoints(self) -> list[EndpointRecord]:
        """The endpoints the running jobs' copies belong to (never stored, never listed)."""
        return self.extra()

    def progress(self, name: str) -> Body | None:
        """pier's own view of a job (GET /pier/transform-jobs/NAME): what Describe cannot say."""
        job = self.store.get(name)
        if job is None:
            return None
        done = self.store.progress(job.name)
        turns = self._turns.get(job.name.lower())
        elapsed = ((job.ended or self.clock()) - job.started) if job.started else 0.0
        return {"name": job.name, "status": job.status, "objects": done.objects, "objectsDone": done.objects_done,
                "units": done.units, "unitsDone": done.units_done, "records": done.records,
                "recordsWritten": done.records_done, "started": job.started, "ended": job.ended,
                "elapsedSeconds": round(elapsed, 3),
                "unitsPerSecond": round(done.units_done / elapsed, 3) if elapsed > 0 else None,
                "readyCopies": len(turns.ready()) if turns else 0, "inFlight": turns.in_flight if turns else 0,
                **({"failureReason": job.failure_reason} if job.failure_reason else {})}

    def names(self) -> list[str]:
        return [j.name for j in sorted(self.store.jobs(), key=lambda j: j.created)]

    # ---- lives (on the event loop)

    async def run(self) -> None:
        """The gateway's lifespan: resume what was running, then wait until cancelled."""
        self._loop = asyncio.get_running_loop()
        try:
            for job in self.store.jobs():
                if job.status == "Stopping":
                    self._ended(job.name, "Stopped", "")
                elif job.status == "InProgress":
                    log.info("resuming transform job %s", job.name)
                    self._start(job)
            await asyncio.Event().wait()
        finally:
            tasks = list(self._tasks.values())
            for task in tasks:
                task.cancel()  # a gateway stopping leaves its jobs InProgress: the next one resumes them
            await asyncio.gather(*tasks, return_exceptions=True)

    def _soon(self, job: JobRecord) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._start, job)

    def _cancel_soon(self, name: str) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop, name)

    def _start(self, job: JobRecord) -> None:
        key = job.name.lower()
        if key not in self._tasks:
            self._tasks[key] = asyncio.create_task(self._live(job), name=f"transform job {job.name}")

    def _stop(self, name: str) -> None:
        task = self._tasks.get(name.lower())
        if task is not None:
            task.cancel(msg="stop")
        else:
            self._ended(name, "Stopped", "")

    async def _live(self, job: JobRecord) -> None:
        key = job.name.lower()
        settings = Settings.of(job.request)
        try:
            model_dir = await self._model(job)
            self.extra.want(key, _endpoint(job, settings, model_dir))
            self.wake()
            # MaxConcurrentTransforms by default: every parallel sequence of every copy.
            limit = settings.max_concurrent or settings.instance_count * copy_concurrency(job.container.Environment)
            workload = Workload.of_variant(job.endpoint_name, VARIANT)
            turns = self._turns[key] = Turns(lambda: self.copies(workload), settings.max_concurrent,
                                             problem=lambda: self.problem(workload))
            run = JobRun(job, settings, self.store, turns, self.forwarder, 2 * limit, lambda: self._started(job.name))
            await run.run()
            self._ended(job.name, "Completed", "")
        except JobFailed as error:
            log.warning("transform job %s failed: %s", job.name, error)
            self._ended(job.name, "Failed", str(error)[:1024])
        except asyncio.CancelledError:
            current = self.store.get(job.name)
            if current is not None and current.status == "Stopping":
                self._ended(job.name, "Stopped", "")
            raise
        except Exception as error:
            log.exception("transform job %s failed", job.name)
            self._ended(job.name, "Failed", f"Internal error in pier ({type(error).__name__}: {error}); please "
                                            "report it. Creating the job again under another name may work.")
        finally:
            self._tasks.pop(key, None)
            self._turns.pop(key, None)
            if self.extra.drop(key):
                self.wake()  # its copies go

    async def _model(self, job: JobRecord) -> str:
        try:
            source = source_of(job.container)
        except NoModelData as error:
            raise JobFailed(str(error)) from None
        while True:
            fetched = self.fetch(source)
            if fetched.folder is not None:
                return str(fetched.folder)
            if fetched.error:
                raise JobFailed(fetched.error)
            await asyncio.sleep(FETCH_POLL_S)

    def _started(self, name: str) -> None:
        with self._changing:
            job = self.store.get(name)
            if job is not None and job.started is None:
                self.store.put(job.model_copy(update={"started": self.clock(), "modified": self.clock()}))

    def _ended(self, name: str, status: str, reason: str) -> None:
        with self._changing:
            job = self.store.get(name)
            if job is None or job.status not in RUNNING:
                return
            now = self.clock()
            self.store.put(job.model_copy(update={"status": status, "failure_reason": reason, "ended": now,
                                                  "modified": now}))
        self.store.forget_progress(job.name)
        log.info("transform job %s %s%s", job.name, status.lower(), f": {reason}" if reason else "")

    def _job(self, name: str, region: str) -> JobRecord:
        job = self.store.get(name)
        if job is None:
            raise ResourceNotFound(f'Could not find requested job with name {name}')
        return job


def _endpoint(job: JobRecord, settings: Settings, model_dir: str) -> EndpointRecord:
    variant = VariantRecord(name=VARIANT, instance_type=settings.instance_type,
                            instance_count=settings.instance_count, model=job.request["ModelName"],
                            container=job.container, model_dir=model_dir)
    return EndpointRecord(name=job.endpoint_name, arn=job.arn, created=job.created, config_name="",
                          modified=job.modified, status="InService", variants=(variant,))


def _arn(kind: str, name: str, region: str) -> str:
    return f"arn:aws:sagemaker:{region}:{ACCOUNT}:{kind}/{name.lower()}"


