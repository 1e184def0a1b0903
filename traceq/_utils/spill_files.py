"""How spilled Arrow IPC files are written: the one place that decides their encoding."""

from __future__ import annotations

import pyarrow as pa

#: Spilled columns are compressed buffer by buffer with LZ4 frames: a decoded chunk or a model bucket
#: shrinks several times (mostly ids and times that repeat their high bytes), for less CPU than writing,
#: reading and unlinking the bytes saved (benchmarks/README.md, fifteenth round).
CODEC = "lz4"


def write_options() -> pa.ipc.IpcWriteOptions:
    """The options every spill file (decoded chunks, model buckets) is written with."""
    return pa.ipc.IpcWriteOptions(compression=CODEC)
