"""What a copy tells its supervisor about the CPU kernels it computes with, and about a host it cannot run on.

A ready copy names its kernels on /ping (`KERNELS_HEADER`: "AVX-512 repack kernels", or "AMX kernels crash on this
host (SIGSEGV); using AVX-512 repack kernels"), so /pier/copies, `pier describe` and the console show them. A copy
whose model no kernel family can run on this host exits with `UNSERVABLE_EXIT`: starting it again would end the
same way, so its supervisor fails it at once, with the copy's own words, instead of restarting it.
"""

from __future__ import annotations

UNSERVABLE_EXIT = 78  # sysexits' EX_CONFIG: this host cannot run this model, whatever the number of tries
