"""Giving freed memory back to the operating system between ingest stages.

The decoders allocate through the C library's malloc (decoded column buffers, decompressed blocks),
chunks read back from the spill folder through Arrow's pool, the model build through Polars' own
allocator. Memory glibc keeps after the decode cannot be reused by
Polars, so without this it stays in the process's footprint through the build (about 170 MB on a
430 MB trace). ``malloc_trim`` returns it; elsewhere (no glibc) this does nothing.

While a trace is decoded, blocks of a few MB are allocated and freed over and over (decompressed
bodies, column buffers). glibc serves blocks over its threshold (128 KB at first) with fresh ``mmap``
pages, each faulted in and zeroed by the kernel on first touch: 150 k page faults and 0.6 s of system
time on a 430 MB trace. :func:`heap_reused` raises the thresholds while decoding so those blocks are
reused from the heap instead (12 k faults), then restores glibc's defaults and trims.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import pyarrow as pa


@cache
def _libc(name: str, *argtypes: Any) -> Any:
    """The C library's function ``name`` (returning int), or None where it has none."""
    # the symbols already loaded into this process (the C library among them): finding the library
    # by name runs ldconfig in a subprocess
    try:  # CDLL(None) is a TypeError on Windows
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


#: glibc's ``mallopt`` parameters and their documented defaults.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _DEFAULT_THRESHOLD = -1, -3, 128 * 1024
#: While decoding: blocks up to this size come from the heap, which keeps this much free memory.
_DECODE_MMAP_THRESHOLD, _DECODE_TRIM_THRESHOLD = 64 << 20, 256 << 20


@contextmanager
def heap_reused() -> Iterator[None]:
    """While inside, freed blocks of the C heap (up to 64 MB) are kept for reuse instead of being
    unmapped; afterwards glibc's default thresholds (128 KB) are set again, as fixed values (glibc's
    own adjustment of them stays off once set), and the free memory is handed back."""
    mallopt = _libc("mallopt", ctypes.c_int, ctypes.c_int)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _DECODE_MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, _DECODE_TRIM_THRESHOLD)
    try:
        yield
    finally:
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, _DEFAULT_THRESHOLD)
            mallopt(_M_TRIM_THRESHOLD, _DEFAULT_THRESHOLD)
        release_free_memory()  # Arrow's pool too, where the C library has no mallopt


def release_free_memory() -> bool:
    """Return the free pages of Arrow's memory pool and of the C heap to the OS; False where the C
    library cannot."""
    pa.default_memory_pool().release_unused()
    trim = _libc("malloc_trim", ctypes.c_size_t)
    if trim is None:
        return False
    trim(0)
    return True
