"""Where per-file ingest work runs: this process, a local process pool, or Ray tasks on a Ray cluster.

Every executor takes a picklable module-level function and its arguments and yields
``(index, result)`` as tasks finish, so the caller can report progress and commit runs as they complete.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any, Literal

from traceq._utils.jobs import default_jobs
from traceq._utils.parent import exit_with_parent
from traceq.errors import TraceqError
from traceq.ingestion import EXECUTORS

Executor = Literal["local", "ray"]
RAY_ADDRESS_ENV = "RAY_ADDRESS"
POLARS_THREADS_ENV = "POLARS_MAX_THREADS"

#: Why a local pool broke: a worker was killed (out of memory, a signal), or could not start because the
#: calling script starts work when imported (spawned workers import it, as all multiprocessing code does).
BROKEN_POOL = (
    "a worker process ended before finishing its file (killed, out of memory, or it could not start: "
    "a script that calls traceq.ingest with several jobs must make the call under "
    "'if __name__ == \"__main__\":', as the workers import the script)"
)


def run_tasks(
    fn: Callable[[Any], Any], items: Sequence[Any], jobs: int | None = None, executor: Executor = "local"
) -> Iterator[tuple[int, Any]]:
    """Run ``fn(item)`` for every item; yield ``(index, result)`` in completion order.

    ``local``: in this process when ``jobs`` is 1 or there is one item, else a pool of ``jobs`` processes
    (default: all cores). ``ray``: one Ray task per item on the cluster at ``$RAY_ADDRESS``, or on a Ray
    instance started on this machine (and stopped afterwards) when none is running or named.
    """
    if executor == "ray":
        yield from _ray_tasks(fn, items)
        return
    if executor != "local":
        raise TraceqError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    workers = min(jobs or default_jobs(), len(items))
    if workers <= 1:
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    # spawn, not fork: forking a process whose Polars/Arrow thread pools have run can deadlock the child.
    with (
        _polars_threads(max(1, default_jobs() // workers)),
        ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=exit_with_parent,  # a killed parent leaves no workers behind
            initargs=(os.getpid(),),
        ) as pool,
    ):
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        except BaseException as e:
            for future in futures:
                future.cancel()
            if isinstance(e, BrokenProcessPool):
                raise TraceqError(BROKEN_POOL) from None
            raise


@contextmanager
def _polars_threads(n: int) -> Iterator[None]:
    """Workers started inside get Polars thread pools of ``n`` threads (their share of the cores: pools
    as large as the machine in every worker slow each other down), unless the caller chose a size."""
    if POLARS_THREADS_ENV in os.environ:
        yield
        return
    os.environ[POLARS_THREADS_ENV] = str(n)  # read by each spawned worker as it imports Polars
    try:
        yield
    finally:
        os.environ.pop(POLARS_THREADS_ENV, None)


def _ray_tasks(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[tuple[int, Any]]:
    try:
        import ray
    except ImportError:
        raise TraceqError("--executor ray needs Ray installed (pip install 'traceq[ray]')") from None
    started = False
    if not ray.is_initialized():
        ray.init(
            address=os.environ.get(RAY_ADDRESS_ENV) or None,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
        started = True
    try:
        remote = ray.remote(num_cpus=1)(fn)
        refs = {remote.remote(item): i for i, item in enumerate(items)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                yield refs[ref], ray.get(ref)
    finally:
        if started:
            ray.shutdown()
