"""Work done behind the caller: on a thread of its own, in the order given, a bounded number ahead."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class WriteBehind:
    """Runs submitted work on one thread, in order, while the caller goes on; :meth:`submit` waits once
    more than ``ahead`` pieces are queued (each holds its data until done)."""

    def __init__(self, name: str, ahead: int = 2) -> None:
        self.name, self.ahead = name, ahead
        self._thread: ThreadPoolExecutor | None = None
        self._queued: deque[Future[None]] = deque()

    def submit(self, work: Callable[..., None], *args: object) -> None:
        """Run ``work(*args)`` after the work submitted before it."""
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"traceq-{self.name}")
        self._queued.append(self._thread.submit(work, *args))
        while len(self._queued) > self.ahead:
            self._queued.popleft().result()

    def wait(self) -> None:
        """Wait for all submitted work (raising the first error) and stop the thread."""
        try:
            while self._queued:
                self._queued.popleft().result()
        finally:
            self._queued.clear()
            if self._thread is not None:
                self._thread.shutdown()
                self._thread = None
