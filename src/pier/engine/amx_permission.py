"""Turning llama.cpp's AMX kernels off in one process, without another build of llama.cpp.

On Linux a process must ask the kernel for permission to use AMX's tile data (`arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)`) before its first tile instruction. ggml asks once, when the CPU backend first lists its
extra buffer types (at the first model load), and when the kernel says no it leaves AMX out and keeps the other
extra buffers: the AVX-512 / AVX2 repack kernels. ggml reads no setting for this, so pier makes the kernel say no:
a seccomp filter on this process answers that one request with EPERM and lets every other system call through.

That is how a copy on a host where AMX crashes or computes wrong (docs/benchmarks.md, "AMX hosts") keeps the
repack kernels, which are the next fastest, instead of falling back to no extra buffers at all. The filter is
inherited by every thread of the process and by its children, and cannot be lifted: only a copy that has chosen
its kernels installs it, before it loads a model.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
SYS_ARCH_PRCTL = 158  # x86-64
SYS_SECCOMP = 317  # x86-64
AUDIT_ARCH_X86_64 = 0xC000003E
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1  # every thread of the process, not only the caller
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1

# Classic BPF opcodes for the filter below.
_LOAD_WORD = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_RETURN = 0x06  # BPF_RET | BPF_K
# Offsets in struct seccomp_data: the call's number, the architecture, the low half of the first argument.
_NR, _ARCH, _ARG0 = 0, 4, 16


class AmxRefusalError(RuntimeError):
    """The filter could not be installed (not Linux x86-64, or seccomp unavailable)."""


def filter_program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, constant) rows: EPERM for `arch_prctl` with
    ARCH_REQ_XCOMP_PERM on x86-64, everything else allowed. Jumps count rows after the next one."""
    return [
        (_LOAD_WORD, 0, 0, _ARCH),
        (_JUMP_IF_EQUAL, 0, 5, AUDIT_ARCH_X86_64),  # another ABI: allow
        (_LOAD_WORD, 0, 0, _NR),
        (_JUMP_IF_EQUAL, 0, 3, SYS_ARCH_PRCTL),
        (_LOAD_WORD, 0, 0, _ARG0),
        (_JUMP_IF_EQUAL, 0, 1, ARCH_REQ_XCOMP_PERM),
        (_RETURN, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        (_RETURN, 0, 0, SECCOMP_RET_ALLOW),
    ]


def refuse_amx() -> None:
    """From now on this process (every thread) is refused AMX's tile permission, so ggml loads no AMX kernels."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise AmxRefusalError(f"AMX exists only on x86-64 Linux here, not {platform.system()} {platform.machine()}")
    rows = filter_program()
    code = b"".join(struct.pack("HBBI", *row) for row in rows)
    buffer = ctypes.create_string_buffer(code, len(code))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = _Program(len(rows), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # lets an unprivileged process install a filter
        raise AmxRefusalError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
    if libc.syscall(SYS_SECCOMP, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(program)) != 0:
        raise AmxRefusalError(f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {os.strerror(ctypes.get_errno())}")


def tile_permission_errno() -> int:
    """What the kernel answers this process's request for AMX tile data now: 0 (granted) or the errno. For tests
    and the probe's report; asking twice is harmless."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0:
        return 0
    return ctypes.get_errno()
