"""Freed C-heap memory is handed back to the OS between ingest stages (glibc's malloc_trim), and is
reused from the heap while a trace is decoded (glibc's mmap threshold raised, then restored)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import pytest

from traceq._utils.memory import heap_reused, release_free_memory


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


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_decoding_reuses_freed_heap_blocks_then_restores_the_defaults() -> None:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        pytest.skip("glibc older than 2.33")
    libc.mallinfo2.restype = _MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    def mapped_blocks_while_held(size: int) -> int:
        """How many more blocks glibc serves with their own mmap while one block of ``size`` is held."""
        before = libc.mallinfo2().hblks
        p = libc.malloc(size)
        during = libc.mallinfo2().hblks
        libc.free(p)
        return during - before

    with heap_reused():  # a gunzipped body's size: above glibc's default threshold, below the raised one
        assert mapped_blocks_while_held(8 << 20) == 0  # from the heap: reused when freed, no fresh pages
    # Larger than all the free memory the heap holds (earlier work may have left big free blocks, which
    # glibc reuses before it looks at the threshold): new memory, so mapped at the default threshold.
    larger_than_free = max(libc.mallinfo2().fordblks + (1 << 20), 8 << 20)
    assert mapped_blocks_while_held(larger_than_free) == 1
