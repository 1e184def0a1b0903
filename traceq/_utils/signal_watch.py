"""Call a function from a thread of its own as soon as SIGINT or SIGTERM arrives, while the main thread is
busy in C code that looks at Python's signals only now and then."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

_WATCHED = {int(s) for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None}
_STOP = b"\0"  # no signal has number 0


@contextmanager
def calling_on_signal(callback: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``callback`` is called (from another thread) when SIGINT or SIGTERM arrives.

    Python's C-level handler writes each signal's number to the wake-up descriptor at once, even while the
    main thread waits in a library call; a thread reading that descriptor calls ``callback`` (say, DuckDB's
    ``interrupt``), and the signal's Python handler still runs in the main thread when the call returns. The
    query stays in the main thread, and the watching thread is ended and joined before the block is left.
    Outside the main thread, or where the wake-up descriptor is taken, the block runs unwatched."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:
        os.close(read_end)
        os.close(write_end)
        yield
        return
    if previous != -1:  # another part of the process watches signals this way: leave it in place
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
        yield
        return

    def watch() -> None:
        while True:
            data = os.read(read_end, 64)
            if not data or _STOP in data:
                return
            if _WATCHED.intersection(data):
                with suppress(Exception):
                    callback()

    # a daemon, so that nothing can keep the process alive past an interruption of the block's exit below
    watcher = threading.Thread(target=watch, name="traceq-signal-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        try:
            signal.set_wakeup_fd(-1)
        finally:  # each step runs even where a signal's handler raises inside the one before
            try:
                os.set_blocking(write_end, True)
                os.write(write_end, _STOP)
            finally:
                watcher.join()
                os.close(read_end)
                os.close(write_end)
