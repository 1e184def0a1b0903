"""Giving freed memory back to the operating system between ingest stages.

The decoders allocate through the C library's malloc (decoded column buffers, decompressed blocks),
chunks read back from the spill folder through Arrow's pool, the model build through Polars' own
allocator. Memory glibc keeps after the decode cannot be reused by
Polars, so without this it stays in the process's footprint through the build (about 170 MB on a
430 MB trace). ``malloc_trim`` returns it; elsewhere (no glibc) this does nothing.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

import pyarrow as pa


@cache
def _trim() -> Any:
    # the symbols already loaded into this process (the C library among them): finding the library
    # by name runs ldconfig in a subprocess
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the free pages of Arrow's memory pool and of the C heap to the OS; False where the C
    library cannot."""
    pa.default_memory_pool().release_unused()
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
