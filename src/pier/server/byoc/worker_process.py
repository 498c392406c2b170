"""The server's handle on one worker process: spawn it, send a WorkerRequest, read its WorkerReply, end it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path

import pier
from pier.server.byoc.errors import HandlerError
from pier.server.byoc.location import HandlerScript
from pier.server.byoc.worker_frames import HEAD_SIZE, PARENT_ENV, WorkerReply, WorkerRequest, unpack_sizes

STOP_GRACE_S = 5.0

# The worker imports pier from the folder this server imported it from; that folder joins sys.path
# only for `import pier` (submodules are then found through pier.__path__), so the model's own
# packages keep coming first in every later import.
_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); import pier; del sys.path[0]; "
         "from pier.server.byoc.worker import main; sys.exit(main(sys.argv[2:]))")


class WorkerDied(Exception):
    """The worker process exited; the message says how."""


class NotDelivered(WorkerDied):
    """The worker was gone before it could read the request, so another worker may take it."""


class WorkerProcess:
    """The server's handle on one worker process: send a WorkerRequest, read its WorkerReply."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout

    @classmethod
    async def spawn(cls, python: str, script: HandlerScript, model_dir: Path, env: dict[str, str],
                    startup_timeout_s: float) -> WorkerProcess:
        pier_root = str(Path(pier.__file__).resolve().parent.parent)
        handler = script.path
        process = await asyncio.create_subprocess_exec(
            python, "-c", _BOOT, pier_root, str(handler), str(model_dir), *map(str, script.import_path),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env={**env, PARENT_ENV: str(os.getpid())},
            # Its own session: a Ctrl-C or a signal to the server's process group must not kill the
            # workers behind stop()'s back. If the server dies, the worker dies too, busy or not (worker.py).
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

    async def call(self, request: WorkerRequest) -> WorkerReply:
        try:
            self._stdin.write(request.to_frame())
            await self._stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise NotDelivered(await self.exit_description()) from None
        return await self.receive()

    async def receive(self) -> WorkerReply:
        try:
            meta_len, body_len = unpack_sizes(await self._stdout.readexactly(HEAD_SIZE))
            meta = await self._stdout.readexactly(meta_len)
            body = await self._stdout.readexactly(body_len)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            raise WorkerDied(await self.exit_description()) from None
        return WorkerReply.from_frame(json.loads(meta), body)

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
