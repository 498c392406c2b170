"""llama.cpp's log, routed to Python's logging (debug level) instead of stderr, with hooks for code that wants
to read what llama.cpp says on its own thread (a grammar's compile errors)."""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable

import llama_cpp

log = logging.getLogger("pier.engine.llama")
Hook = Callable[[str], None]

_lock = threading.Lock()
_hooks: list[Hook] = []
_callback: object = None  # the ctypes callback, held: a collected callback crashes llama.cpp


def install(hook: Hook | None = None) -> None:
    """Install the callback once per process; add `hook`, called with every message on the logging thread."""
    global _callback
    with _lock:
        if hook is not None and hook not in _hooks:
            _hooks.append(hook)
        if _callback is None:

            @llama_cpp.llama_log_callback
            def callback(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
                message = text.decode("utf-8", "replace")
                log.debug("llama.cpp: %s", message.rstrip())
                for each in _hooks:
                    each(message)

            llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
            _callback = callback
