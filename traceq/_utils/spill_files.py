"""How spilled Arrow IPC files are written and read back: the one place that decides their encoding."""

from __future__ import annotations

import pyarrow as pa

#: Spilled columns are compressed buffer by buffer with LZ4 frames: a decoded chunk or a model bucket
#: shrinks several times (mostly ids and times that repeat their high bytes), for less CPU than writing,
#: reading and unlinking the bytes saved (benchmarks/README.md, fifteenth round).
CODEC = "lz4"


def write_options() -> pa.ipc.IpcWriteOptions:
    """The options every spill file (decoded chunks, model buckets) is written with (compressed on the
    writing thread, not on Arrow's pool of threads)."""
    return pa.ipc.IpcWriteOptions(compression=CODEC, use_threads=False)


def read_pool() -> pa.MemoryPool:
    """The pool a spill file's columns are decompressed into: the C heap, which the ingest trims between
    stages (:func:`traceq._utils.memory.release_free_memory`); Arrow's default pool (mimalloc) kept the
    model buckets' decompressed blocks in the footprint through the stored metrics (+60-90 MB)."""
    return pa.system_memory_pool()
