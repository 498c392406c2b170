"""A model folder's inference.py served by a pool of worker processes.

HandlerService installs code/requirements.txt into an environment of the model's own, starts
SAGEMAKER_MODEL_SERVER_WORKERS worker processes that each import inference.py and run model_fn
once, and spreads invocations over the idle ones. The user's code never runs in the server's
process: a handler that hangs or crashes costs one worker, which is replaced.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import sys
import uuid
from pathlib import Path

from pier.server.byoc.environment import prepare_python
from pier.server.byoc.errors import HandlerError
from pier.server.byoc.location import HandlerScript, search_handler
from pier.server.byoc.worker_frames import WorkerReply, WorkerRequest
from pier.server.byoc.worker_process import STOP_GRACE_S, NotDelivered, WorkerDied, WorkerProcess
from pier.server.settings import HandlerSettings

log = logging.getLogger("pier.server.byoc")

RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class HandlerService:
    """A model folder's inference.py, run in `workers` processes, answering invocations.

    `timeout_s` bounds one invocation twice over: waiting for an idle worker (503 after it) and the
    handler's run (504 after it; that worker is killed and replaced, since a hung handler never returns).
    `cache_dir` is where this model's requirements environment lives (default: under PIER_CACHE_DIR,
    else ~/.cache/pier); `startup_timeout_s` bounds each worker's import and model_fn.
    """

    def __init__(self, model_dir: Path, workers: int = 1, timeout_s: float = 60.0, *,
                 cache_dir: Path | None = None, startup_timeout_s: float = 600.0,
                 script: HandlerScript | None = None, settings: HandlerSettings | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}; fix SAGEMAKER_MODEL_SERVER_WORKERS.")
        self.model_dir = Path(model_dir)
        self.workers = workers
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._cache_dir = cache_dir
        self._script = script
        self._settings = settings  # the copy's (ServerSettings.handler); None: read from this process's environment
        self._handler = Path()
        self._python = sys.executable
        self._idle: asyncio.Queue[WorkerProcess] = asyncio.Queue()
        self._live: dict[int, WorkerProcess] = {}
        self._jobs: set[asyncio.Task[WorkerReply]] = set()
        self._watchers: set[asyncio.Task[None]] = set()
        self._state = "new"  # -> starting -> serving -> stopping -> stopped

    @property
    def ready(self) -> bool:
        return self._state == "serving" and any(worker.alive for worker in self._live.values())

    async def start(self) -> None:
        """Install code/requirements.txt, start the workers and let each run model_fn."""
        if self._state != "new":
            raise HandlerError(500, f"HandlerService.start() was already called (state {self._state}).")
        self._state = "starting"
        script = self._script
        settings = self._settings or HandlerSettings.from_env()
        if script is None:
            search = await asyncio.to_thread(search_handler, self.model_dir, settings)
            if search.script is None:
                raise HandlerError(500, f"{self.model_dir} has no code/{search.program} ({search.missing()}); add "
                                        f"one, or set SAGEMAKER_PROGRAM to the name of your script.")
            script = self._script = search.script
        handler = self._handler = script.path
        env_dir = self._cache_dir or settings.cache_dir / "handlers" / _slug(script.code_dir)
        self._python = await prepare_python(script.code_dir / "requirements.txt", env_dir)
        started = await asyncio.gather(*(self._spawn() for _ in range(self.workers)), return_exceptions=True)
        workers = [w for w in started if isinstance(w, WorkerProcess)]
        failures = [e for e in started if isinstance(e, BaseException)]
        if self._state != "starting" and not failures:  # stop() came while model_fn ran
            failures = [HandlerError(503, "The handler was stopped while it started.")]
        if failures:
            await asyncio.gather(*(worker.close() for worker in workers))
            self._state = "stopped"
            raise failures[0]
        for index, worker in enumerate(workers):
            self._adopt(index, worker)
        self._state = "serving"
        log.info("handler %s serving with %d worker(s)", handler, self.workers)

    async def invoke(self, body: bytes, content_type: str, accept: str,
                     custom_attributes: str | None = None) -> tuple[bytes, str]:
        """Run one request through the handler; (response body, response content type)."""
        if self._state != "serving":
            raise HandlerError(503, f"The handler is {self._state}, not serving; wait until /ping says 200.")
        request = WorkerRequest(body, content_type, accept, custom_attributes, uuid.uuid4().hex)
        job = asyncio.ensure_future(self._run(request))
        self._jobs.add(job)
        job.add_done_callback(self._job_done)
        # Shielded: a caller that goes away must not abandon a worker in the middle of a reply.
        reply = await asyncio.shield(job)
        return reply.body, reply.content_type

    async def stop(self) -> None:
        """Let in-flight invocations finish, then end the workers."""
        if self._state in ("stopping", "stopped"):
            return
        starting, self._state = self._state == "starting", "stopping"
        if starting:
            return  # start() sees this when its workers have loaded, and ends them
        if self._jobs:
            await asyncio.wait(self._jobs, timeout=2 * self.timeout_s + STOP_GRACE_S)
        for watcher in self._watchers:
            watcher.cancel()
        await asyncio.gather(*self._watchers, return_exceptions=True)
        await asyncio.gather(*(worker.close() for worker in self._live.values()))
        self._live.clear()
        self._state = "stopped"

    async def _run(self, request: WorkerRequest) -> WorkerReply:
        while True:
            worker = await self._acquire()
            try:
                return await self._run_on(worker, request)
            except NotDelivered:
                continue  # it died before reading the request (its watcher replaces it): try another

    async def _run_on(self, worker: WorkerProcess, request: WorkerRequest) -> WorkerReply:
        try:
            reply = await asyncio.wait_for(worker.call(request), self.timeout_s)
        except TimeoutError:
            await worker.kill()
            raise HandlerError(504, f"{self._handler.name} did not answer within {self.timeout_s:g} s "
                                    f"(SAGEMAKER_MODEL_SERVER_TIMEOUT); its worker was stopped and is being "
                                    f"replaced. Make the handler faster or raise the timeout.") from None
        except NotDelivered:
            raise
        except WorkerDied as e:
            raise HandlerError(500, f"The handler's worker process {e} while answering this request; a new "
                                    f"worker is starting. The handler's output is in the log.") from None
        except asyncio.CancelledError:
            await worker.kill()  # a reply half-read leaves the pipe unusable
            raise
        self._idle.put_nowait(worker)
        if reply.status != 200:
            raise HandlerError(reply.status, reply.error)
        return reply

    async def _acquire(self) -> WorkerProcess:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            try:
                worker = await asyncio.wait_for(self._idle.get(), max(deadline - loop.time(), 0))
            except TimeoutError:
                busy = f"All {self.workers} handler workers stayed busy for {self.timeout_s:g} s"
                fix = "raise SAGEMAKER_MODEL_SERVER_WORKERS or send fewer requests at once"
                raise HandlerError(503, f"{busy}; {fix}.") from None
            if worker.alive:
                return worker
            # It died while idle; its watcher is already starting a replacement.

    async def _spawn(self) -> WorkerProcess:
        assert self._script is not None
        return await WorkerProcess.spawn(self._python, self._script, self.model_dir, self._worker_env(),
                                         self.startup_timeout_s)

    def _worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Handlers read these (the seeds size llama.cpp's threads by the worker count).
        env["SAGEMAKER_MODEL_SERVER_WORKERS"] = str(self.workers)
        env["SAGEMAKER_MODEL_SERVER_TIMEOUT"] = f"{self.timeout_s:g}"
        env["PYTHONUNBUFFERED"] = "1"  # the handler's prints reach the log as they happen
        return env

    def _adopt(self, index: int, worker: WorkerProcess) -> None:
        self._live[index] = worker
        self._idle.put_nowait(worker)
        watcher = asyncio.ensure_future(self._watch(index, worker))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, index: int, worker: WorkerProcess) -> None:
        """Replace the worker when its process ends, however that happens (crash, kill, timeout)."""
        await worker.wait()
        if self._live.get(index) is worker:
            del self._live[index]
        if self._state != "serving":
            return
        log.warning("handler worker %d (pid %d) %s; starting a new one", index, worker.pid,
                    await worker.exit_description())
        for attempt in range(sys.maxsize):
            try:
                replacement = await self._spawn()
            except HandlerError as e:
                delay = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
                log.error("restarting handler worker %d failed: %s; retrying in %g s", index, e.message, delay)
                await asyncio.sleep(delay)
                continue
            if self._state != "serving":
                await replacement.close()
                return
            self._adopt(index, replacement)
            return

    def _job_done(self, job: asyncio.Task[WorkerReply]) -> None:
        self._jobs.discard(job)
        if not job.cancelled():
            job.exception()  # mark it retrieved: its caller may have gone away


def _slug(code_dir: Path) -> str:
    resolved = code_dir.resolve()
    return f"{resolved.parent.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:12]}"
