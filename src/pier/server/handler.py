"""Bring-your-own-code handlers: a model folder's code/inference.py, run as SageMaker's toolkit does.

HandlerService installs code/requirements.txt into an environment of the model's own, starts
SAGEMAKER_MODEL_SERVER_WORKERS worker processes that each import inference.py and run model_fn
once, and spreads invocations over the idle ones. The user's code never runs in the server's
process: a handler that hangs or crashes costs one worker, which is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pier
from pier.errors import PierError
from pier.server.handler_worker import HEAD_SIZE, Invocation, Reply, unpack_sizes

log = logging.getLogger(__name__)

DEFAULT_PROGRAM = "inference.py"
STOP_GRACE_S = 5.0
RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)


class HandlerError(PierError):
    """The handler could not be started or could not answer; `status` is the HTTP status to send."""

    code = "handler_error"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def find_handler(model_dir: Path) -> Path | None:
    """The user's handler module: SAGEMAKER_PROGRAM (default inference.py) in SAGEMAKER_SUBMIT_DIRECTORY
    (default model_dir/code). None when the default is absent; an error when a named program is."""
    program = os.environ.get("SAGEMAKER_PROGRAM") or DEFAULT_PROGRAM
    if not program.endswith(".py"):
        program += ".py"
    path = _code_dir(model_dir) / program
    if path.is_file():
        return path
    if os.environ.get("SAGEMAKER_PROGRAM"):
        raise HandlerError(500, f"SAGEMAKER_PROGRAM names {program}, but there is no {path}; put the script "
                                f"there or unset SAGEMAKER_PROGRAM.")
    return None


def _code_dir(model_dir: Path) -> Path:
    submitted = os.environ.get("SAGEMAKER_SUBMIT_DIRECTORY")
    if submitted and Path(submitted).is_dir():
        return Path(submitted)
    if submitted:
        # The SageMaker SDK may name an S3 sourcedir.tar.gz here while also repacking the code into
        # model_dir/code, which is where the code is once the model has been fetched.
        log.warning("SAGEMAKER_SUBMIT_DIRECTORY=%s is not a folder; looking in %s/code", submitted, model_dir)
    return model_dir / "code"


# --- code/requirements.txt -----------------------------------------------------------------------


def cache_root() -> Path:
    explicit = os.environ.get("PIER_CACHE_DIR")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pier"


async def prepare_python(requirements: Path, env_dir: Path) -> str:
    """The interpreter the workers run: pier's own, or, when the model has requirements, a virtual
    environment of its own in env_dir that sees pier's packages behind the model's. pip skips what
    pier's environment already satisfies, as it would in a SageMaker container, and never writes there."""
    if not requirements.is_file() or not _requirement_lines(requirements):
        return sys.executable
    python = env_dir / "bin" / "python"
    key = _environment_key(requirements)
    marker = env_dir / "requirements.sha256"
    async with _file_lock(env_dir.with_name(env_dir.name + ".lock")):
        if python.exists() and marker.is_file() and marker.read_text() == key:
            return str(python)
        shutil.rmtree(env_dir, ignore_errors=True)
        await _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], cwd=requirements.parent)
        _link_pier_packages(python)
        await _pip_install(python, requirements)
        marker.write_text(key)
    return str(python)


def _requirement_lines(requirements: Path) -> list[str]:
    lines = (line.strip() for line in requirements.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _pier_site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def _environment_key(requirements: Path) -> str:
    digest = hashlib.sha256(requirements.read_bytes())
    for part in (sys.version, sys.executable, *_pier_site_dirs()):
        digest.update(b"\0" + part.encode())
    return digest.hexdigest()


def _link_pier_packages(python: Path) -> None:
    # A .pth import line runs site.addsitedir, so pier's packages (and their own .pth files, such as
    # editable installs) come after the model's, whether pier itself runs in a virtualenv or not.
    site_packages = next(python.parent.parent.glob("lib/python*/site-packages"))
    line = f"import site; list(map(site.addsitedir, {_pier_site_dirs()!r}))\n"
    (site_packages / "_pier_packages.pth").write_text(line)


async def _pip_install(python: Path, requirements: Path) -> None:
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
               "-r", str(requirements)]
    log.info("installing %s for this model into %s", requirements, python.parent.parent)
    # Relative paths in a requirements file (./mypkg) are relative to the working directory.
    code, output = await _run(command, cwd=requirements.parent, check=False)
    if code != 0:
        log.error("pip install -r %s failed:\n%s", requirements, output)
        raise HandlerError(500, _pip_failure(requirements, output))


def _pip_failure(requirements: Path, output: str) -> str:
    names = re.findall(r"(?:requirement|distribution found for|Failed to build|Could not build wheels for)\s+"
                       r"([^\s(;]+)", output)
    culprit = names[-1] if names else ", ".join(_requirement_lines(requirements))
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = ([line for line in lines if line.lower().startswith("error")] or lines)[-3:]
    return (f"Installing {requirements} failed at {culprit}: {' | '.join(errors)}. Fix or remove that "
            f"requirement (or make the package index reachable); pip's full output is in the log.")


async def _run(command: list[str], cwd: Path, check: bool = True) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await process.communicate()
    except asyncio.CancelledError:
        process.kill()
        raise
    output = out.decode("utf-8", "replace")
    if check and process.returncode != 0:
        tail = output.strip()[-500:]
        raise HandlerError(500, f"{' '.join(command[:4])} failed ({process.returncode}): {tail}")
    return process.returncode or 0, output


@contextlib.asynccontextmanager
async def _file_lock(path: Path) -> AsyncIterator[None]:
    """Several copies of one model may start at once; one installs, the others wait and reuse it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        await asyncio.to_thread(fcntl.flock, handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- one worker process, seen from the server ----------------------------------------------------

# The worker imports pier from the folder this server imported it from; that folder joins sys.path
# only for `import pier` (submodules are then found through pier.__path__), so the model's own
# packages keep coming first in every later import.
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); import pier; del sys.path[0]; "
         "from pier.server.handler_worker import main; sys.exit(main(sys.argv[2:]))")


class WorkerDied(Exception):
    """The worker process exited; the message says how."""


class NotDelivered(WorkerDied):
    """The worker was gone before it could read the request, so another worker may take it."""


class WorkerProcess:
    """The server's handle on one worker process: send an Invocation, read its Reply."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout

    @classmethod
    async def spawn(cls, python: str, handler: Path, model_dir: Path, env: dict[str, str],
                    startup_timeout_s: float) -> WorkerProcess:
        pier_root = str(Path(pier.__file__).resolve().parent.parent)
        process = await asyncio.create_subprocess_exec(
            python, "-c", _BOOT, pier_root, str(handler), str(model_dir),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
            # Its own session: a Ctrl-C or a signal to the server's process group must not kill the
            # workers behind stop()'s back. If the server dies, the worker reads EOF and exits.
            start_new_session=True,
        )
        worker = cls(process)
        try:
            loaded = await asyncio.wait_for(worker.receive(), startup_timeout_s)
        except asyncio.CancelledError:
            process.kill()  # the server is stopping while this worker still loads
            raise
        except TimeoutError:
            await worker.kill()
            raise HandlerError(500, f"model_fn in {handler} did not finish within {startup_timeout_s:.0f} s; "
                                    f"raise SAGEMAKER_STARTUP_TIMEOUT or load the model faster.") from None
        except NotDelivered:
            raise
        except WorkerDied as e:
            raise HandlerError(500, f"The worker loading {handler} {e}; its output is in the log.") from None
        if loaded.status != 200:
            await worker.kill()
            raise HandlerError(500, f"Loading {handler} failed: {loaded.error}")
        return worker

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

    async def call(self, request: Invocation) -> Reply:
        try:
            self._stdin.write(request.to_frame())
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise NotDelivered(await self.exit_description()) from None
        return await self.receive()

    async def receive(self) -> Reply:
        try:
            meta_len, body_len = unpack_sizes(await self._stdout.readexactly(HEAD_SIZE))
            meta = await self._stdout.readexactly(meta_len)
            body = await self._stdout.readexactly(body_len)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            raise WorkerDied(await self.exit_description()) from None
        return Reply.from_frame(json.loads(meta), body)

    async def wait(self) -> int:
        return await self._process.wait()

    async def exit_description(self) -> str:
        code = await self._process.wait()
        if code < 0:
            name = signal.Signals(-code).name
            why = " (the out-of-memory killer sends SIGKILL)" if name == "SIGKILL" else ""
            return f"was killed by {name}{why}"
        return f"exited with status {code}"

    async def kill(self) -> None:
        if self.alive:
            self._process.kill()
        await self._process.wait()

    async def close(self) -> None:
        """Close its stdin (the worker exits when it reads EOF); kill it if it lingers."""
        if self.alive:
            self._stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), STOP_GRACE_S)
        await self.kill()


# --- the service ---------------------------------------------------------------------------------


class HandlerService:
    """A model folder's inference.py, run in `workers` processes, answering invocations.

    `timeout_s` bounds one invocation twice over: waiting for an idle worker (503 after it) and the
    handler's run (504 after it; that worker is killed and replaced, since a hung handler never returns).
    `cache_dir` is where this model's requirements environment lives (default: under PIER_CACHE_DIR,
    else ~/.cache/pier); `startup_timeout_s` bounds each worker's import and model_fn.
    """

    def __init__(self, model_dir: Path, workers: int = 1, timeout_s: float = 60.0, *,
                 cache_dir: Path | None = None, startup_timeout_s: float = 600.0) -> None:
        if workers < 1:
            raise ValueError(f"workers must be 1 or more, not {workers}; fix SAGEMAKER_MODEL_SERVER_WORKERS.")
        self.model_dir = Path(model_dir)
        self.workers = workers
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        self._cache_dir = cache_dir
        self._handler = Path()
        self._python = sys.executable
        self._idle: asyncio.Queue[WorkerProcess] = asyncio.Queue()
        self._live: dict[int, WorkerProcess] = {}
        self._jobs: set[asyncio.Task[Reply]] = set()
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
        handler = find_handler(self.model_dir)
        if handler is None:
            raise HandlerError(500, f"{self.model_dir} has no code/{DEFAULT_PROGRAM}; add one, or set "
                                    f"SAGEMAKER_PROGRAM to the name of your script.")
        self._handler = handler
        env_dir = self._cache_dir or cache_root() / "handlers" / _slug(handler.parent)
        self._python = await prepare_python(handler.parent / "requirements.txt", env_dir)
        started = await asyncio.gather(*(self._spawn() for _ in range(self.workers)), return_exceptions=True)
        workers = [w for w in started if isinstance(w, WorkerProcess)]
        failures = [e for e in started if isinstance(e, BaseException)]
        if self._state != "starting" and not failures:  # stop() came while model_fn ran
            failures = [HandlerError(503, "The handler was stopped while it started.")]
        if failures:
            await asyncio.gather(*(worker.close() for worker in workers))
            self._state = "stopped"
            raise failures[0]
        for slot, worker in enumerate(workers):
            self._adopt(slot, worker)
        self._state = "serving"
        log.info("handler %s serving with %d worker(s)", handler, self.workers)

    async def invoke(self, body: bytes, content_type: str, accept: str,
                     custom_attributes: str | None = None) -> tuple[bytes, str]:
        """Run one request through the handler; (response body, response content type)."""
        if self._state != "serving":
            raise HandlerError(503, f"The handler is {self._state}, not serving; wait until /ping says 200.")
        request = Invocation(body, content_type, accept, custom_attributes, uuid.uuid4().hex)
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

    async def _run(self, request: Invocation) -> Reply:
        while True:
            worker = await self._acquire()
            try:
                return await self._run_on(worker, request)
            except NotDelivered:
                continue  # it died before reading the request (its watcher replaces it): try another

    async def _run_on(self, worker: WorkerProcess, request: Invocation) -> Reply:
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
        return await WorkerProcess.spawn(self._python, self._handler, self.model_dir, self._worker_env(),
                                         self.startup_timeout_s)

    def _worker_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Handlers read these (the seeds size llama.cpp's threads by the worker count).
        env["SAGEMAKER_MODEL_SERVER_WORKERS"] = str(self.workers)
        env["SAGEMAKER_MODEL_SERVER_TIMEOUT"] = f"{self.timeout_s:g}"
        env["PYTHONUNBUFFERED"] = "1"  # the handler's prints reach the log as they happen
        return env

    def _adopt(self, slot: int, worker: WorkerProcess) -> None:
        self._live[slot] = worker
        self._idle.put_nowait(worker)
        watcher = asyncio.ensure_future(self._watch(slot, worker))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, slot: int, worker: WorkerProcess) -> None:
        """Replace the worker when its process ends, however that happens (crash, kill, timeout)."""
        await worker.wait()
        if self._live.get(slot) is worker:
            del self._live[slot]
        if self._state != "serving":
            return
        log.warning("handler worker %d (pid %d) %s; starting a new one", slot, worker.pid,
                    await worker.exit_description())
        for attempt in range(sys.maxsize):
            try:
                replacement = await self._spawn()
            except HandlerError as e:
                delay = RESTART_BACKOFF_S[min(attempt, len(RESTART_BACKOFF_S) - 1)]
                log.error("restarting handler worker %d failed: %s; retrying in %g s", slot, e.message, delay)
                await asyncio.sleep(delay)
                continue
            if self._state != "serving":
                await replacement.close()
                return
            self._adopt(slot, replacement)
            return

    def _job_done(self, job: asyncio.Task[Reply]) -> None:
        self._jobs.discard(job)
        if not job.cancelled():
            job.exception()  # mark it retrieved: its caller may have gone away


def _slug(code_dir: Path) -> str:
    resolved = code_dir.resolve()
    return f"{resolved.parent.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:12]}"
