"""Profile: each query a report makes on a stored run, with its time, the process's peak memory and the
bytes it handed to writes while it ran (DuckDB's spills; ``wchar``, as the ingest benchmarks count them),
in the order the report makes them (one process; the stored metrics are read where the run has them, as
the report reads them). ``--memory-limit 640MB`` keeps DuckDB to a limit as the ingest's stored metrics do
(``traceq.ingestion.metrics.metrics_memory_limit``).

Usage: python benchmarks/report_queries.py RUN --store STORE [--no-stored] [--memory-limit SIZE]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

from traceq.analysis.report import run_report
from traceq.querying.engine import Session
from traceq.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nsys_ingest import written_bytes


class PeakRss:
    """The process's resident memory, sampled every 5 ms on a thread: the peak since :meth:`reset`."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss())

    def reset(self) -> None:
        self.peak = rss()


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--no-stored", action="store_true", help="compute every metric from the events")
    ap.add_argument("--memory-limit", help="DuckDB's memory limit while tables are made (e.g. 640MB)")
    args = ap.parse_args()
    store = Store(args.store)
    run_id = store.resolve(args.run)
    memory = PeakRss()
    rows: list[tuple[str, float, int, int, int]] = []
    real_create = Session._create

    def timed(self: Session, name: str, statement: str, con: object) -> None:
        memory.reset()
        written = written_bytes()
        start = time.perf_counter()
        real_create(self, name, statement, con)  # type: ignore[arg-type]
        seconds = time.perf_counter() - start
        ((n,),) = con.execute(f"SELECT count(*) FROM {name}").fetchall()  # type: ignore[attr-defined]
        rows.append((name, seconds, memory.peak, n, written_bytes() - written))

    Session._create = timed  # type: ignore[method-assign]
    start = time.perf_counter()
    with Session(
        store, [run_id], own_queries=True, use_stored=not args.no_stored, memory_limit=args.memory_limit
    ) as session:
        run_report(run_id, store, session)
    total = time.perf_counter() - start
    print(f"{'query':<24}{'s':>8}{'peak MB':>10}{'rows':>12}{'written MB':>12}")
    for name, s, peak, n, w in rows:
        print(f"{name:<24}{s:>8.2f}{peak / 1e6:>10,.0f}{n:>12,}{w / 1e6:>12,.0f}")
    print(
        f"{'report (all)':<24}{total:>8.2f}{max(r[2] for r in rows) / 1e6:>10,.0f}{'':>12}"
        f"{sum(r[4] for r in rows) / 1e6:>12,.0f}"
    )


if __name__ == "__main__":
    main()
