"""Cut an Nsight Systems SQLite export down to a few of its NVTX step ranges (how the bundled ones were made).

Keeps the host rows (CUDA API calls, NVTX ranges, profiler overhead) that start inside the chosen ranges'
span, the GPU rows (kernels, copies, sets, syncs, CUDA events) launched from the kept API calls or
running inside the span (work queued before it, as a capture that began there would show), and every
table without times (strings, devices, threads, enums, metadata) as it is.

Usage: python trim_nsys.py IN.sqlite[.gz] OUT.sqlite.gz RANGE_REGEX FIRST NUM
(FIRST counts from 1 among the ranges whose text matches RANGE_REGEX, in time order.)
"""

from __future__ import annotations

import gzip
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

HOST_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "PROFILER_OVERHEAD", "OSRT_API", "CUDNN_EVENTS",
               "CUBLAS_EVENTS")  # fmt: skip
GPU_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION")  # fmt: skip


def _tables(db: sqlite3.Connection) -> dict[str, set[str]]:
    names = [r[0] for r in db.execute("select name from sqlite_master where type = 'table'")]
    return {t: {r[1] for r in db.execute(f"pragma table_info({t})")} for t in names}


def trim(src: Path, dst: Path, pattern: str, first: int, num: int) -> tuple[int, int]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "export.sqlite"
        opener = gzip.open if src.name.endswith(".gz") else open
        with opener(src, "rb") as f, open(work, "wb") as g:
            shutil.copyfileobj(f, g)
        db = sqlite3.connect(work)
        db.create_function("regexp", 2, lambda p, s: s is not None and re.search(p, s) is not None)
        text = "coalesce(e.text, s.value)"
        ranges = db.execute(
            f"select e.start, e.end from NVTX_EVENTS e left join StringIds s on s.id = e.textId "
            f"where e.end is not null and regexp(?, {text}) order by e.start",
            (pattern,),
        ).fetchall()
        chosen = ranges[first - 1 : first - 1 + num]
        if len(chosen) < num:
            raise SystemExit(f"{src}: only {len(ranges)} ranges match {pattern!r}")
        lo, hi = chosen[0][0], chosen[-1][1]
        tables = _tables(db)
        for t in HOST_TABLES:
            if t in tables and "start" in tables[t]:
                db.execute(f"delete from {t} where start < ? or start >= ?", (lo, hi))
        kept = "select correlationId from CUPTI_ACTIVITY_KIND_RUNTIME"
        for t in GPU_TABLES:
            if t in tables:
                db.execute(
                    f"delete from {t} where correlationId not in ({kept}) and (start < ? or start >= ?)", (lo, hi)
                )
        if "CUPTI_ACTIVITY_KIND_CUDA_EVENT" in tables:
            db.execute(f"delete from CUPTI_ACTIVITY_KIND_CUDA_EVENT where correlationId not in ({kept})")
        if "DIAGNOSTIC_EVENT" in tables:
            db.execute("delete from DIAGNOSTIC_EVENT where timestamp < ? or timestamp >= ?", (lo, hi))
        db.commit()
        db.execute("vacuum")
        db.close()
        with open(work, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
            shutil.copyfileobj(f, g)
    return lo, hi


if __name__ == "__main__":
    a = sys.argv[1:]
    lo, hi = trim(Path(a[0]), Path(a[1]), a[2], int(a[3]), int(a[4]))
    print(f"kept {(hi - lo) / 1e6:.1f} ms")
