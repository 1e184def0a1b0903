"""Work run on threads of its own while the caller goes on, its results taken back in the order given."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class InOrder:
    """Runs submitted work on ``threads`` threads while the caller goes on. Results come back in the
    order the work was submitted; :meth:`submit` waits for the oldest pieces once more than ``ahead``
    are in flight (each holds its data until done, so memory stays bounded)."""

    def __init__(self, name: str, threads: int = 1, ahead: int = 2) -> None:
        self.name, self.threads, self.ahead = name, threads, ahead
        self._pool: ThreadPoolExecutor | None = None
        self._queued: deque[Future[Any]] = deque()

    def submit(self, work: Callable[..., Any], *args: object) -> list[Any]:
        """Queue ``work(*args)``; return the results of the oldest pieces waited for to stay within
        ``ahead`` (in order; an error is raised here, in its turn)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"traceq-{self.name}")
        self._queued.append(self._pool.submit(work, *args))
        done = []
        while len(self._queued) > self.ahead:
            done.append(self._queued.popleft().result())
        return done

    def drain(self) -> list[Any]:
        """The results of all work still in flight, in order (raising the first error), and the threads
        stopped."""
        try:
            return [self._queued.popleft().result() for _ in range(len(self._queued))]
        finally:
            self.close()

    def close(self) -> None:
        """Drop work not yet started, wait for what runs, and stop the threads (for errors on the way)."""
        for future in self._queued:
            future.cancel()
        self._queued.clear()
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
