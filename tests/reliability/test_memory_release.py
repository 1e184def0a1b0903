"""Freed C-heap memory is handed back to the OS between ingest stages (glibc's malloc_trim)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import pytest

from traceq.memory import release_free_memory


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_memory_goes_back_to_the_os() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = 64 << 10  # below the mmap threshold: served from the heap, kept by glibc when freed
    blocks = [libc.malloc(block) for _ in range(3000)]
    for p in blocks:
        ctypes.memset(p, 1, block)
    keep = libc.malloc(block)  # a live block above the freed ones: glibc cannot just lower the heap top
    ctypes.memset(keep, 1, block)
    for p in blocks:
        libc.free(p)
    before = _rss_mb()
    assert release_free_memory()
    after = _rss_mb()
    libc.free(keep)
    assert before - after > 100, (before, after)  # 188 MB were freed
