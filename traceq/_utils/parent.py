"""Worker processes that end when the process that started them dies.

A pool worker blocked in its task never learns that its parent was killed (SIGKILL runs no cleanup):
two ingest workers of 450 MB each went on for minutes. On Linux the kernel kills the worker with its
parent (``prctl(PR_SET_PDEATHSIG)``); everywhere a thread also checks every second that the parent is
still the one that started it, and ends the worker otherwise.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

#: ``prctl``'s option: the signal this process gets when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: Seconds between two checks of the parent.
POLL_S = 1.0


def exit_with_parent(parent: int) -> None:
    """Make this process (a worker started by ``parent``, a process id) end when ``parent`` dies; a pool's
    initializer."""
    if sys.platform.startswith("linux"):
        _kill_with_parent()
    if os.getppid() != parent:  # died before this was set
        os._exit(1)
    threading.Thread(target=_watch, args=(parent,), name="traceq-parent", daemon=True).start()


def _kill_with_parent() -> None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through the C library, where it can be found."""
    with contextlib.suppress(OSError, AttributeError, TypeError):  # the polling thread still ends the worker
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


def _watch(parent: int) -> None:
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent:
            os._exit(1)
