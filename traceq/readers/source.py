"""Opening input files: existence checks, gzip by content, hashing and byte-level progress."""

from __future__ import annotations

import hashlib
import io
import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from traceq.errors import InputError

try:  # ISA-L's inflate: the zlib interface, the same bytes, about twice zlib's speed
    from isal import isal_zlib as inflate
except ImportError:  # pragma: no cover - isal is a dependency; zlib where its wheel is missing
    import zlib as inflate  # type: ignore[no-redef]

GZIP_MAGIC = b"\x1f\x8b"
BLOCK = 8 << 20

Progress = Callable[[int], None]
"""Called with the number of *file* bytes consumed since the previous call. It may also have a
``stage(text)`` method, told what an ingest does once the bytes are read (see :func:`report_stage`)."""


def report_stage(progress: Progress | None, text: str) -> None:
    """Tell ``progress`` (where it listens) that the work after reading is now ``text``."""
    stage = getattr(progress, "stage", None)
    if stage is not None:
        stage(text)


def check_readable(path: Path) -> None:
    """Raise :class:`InputError` unless ``path`` is a readable, non-empty regular file."""
    if not path.exists():
        raise InputError(path, "no such file")
    if path.is_dir():
        raise InputError(path, "is a directory")
    if not path.is_file():
        raise InputError(path, "not a regular file")
    if not os.access(path, os.R_OK):
        raise InputError(path, "permission denied")
    if path.stat().st_size == 0:
        raise InputError(path, "empty file")


def is_gzip(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def file_sha256(path: Path) -> str:
    """sha256 of the file's bytes, read in blocks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            h.update(block)
    return h.hexdigest()


Identity = tuple[int, int, int, int, int]
"""What says a file is the same file with the same bytes: device, inode, size, mtime and ctime (ns)."""


def identity(path: Path) -> Identity:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


#: Per file being read (by real path): the sha256 of each complete pass :func:`iter_content` made over it.
_PASSES: dict[str, list[str]] = {}


@contextmanager
def hashing_reads(path: Path) -> Iterator[list[str]]:
    """While the block runs, every complete pass of :func:`iter_content` over ``path`` appends the sha256 of
    the bytes it read to the list yielded: the hash of what was decoded, not of what was there before."""
    key = os.path.realpath(path)
    passes: list[str] = []
    _PASSES[key] = passes
    try:
        yield passes
    finally:
        _PASSES.pop(key, None)


def head_bytes(path: Path, n: int = 1 << 16) -> bytes:
    """The first ``n`` bytes of the (decompressed) content, for format sniffing."""
    if not is_gzip(path):
        with path.open("rb") as f:
            return f.read(n)
    d = inflate.decompressobj(wbits=31)
    out = b""
    with path.open("rb") as f:
        while len(out) < n and (block := f.read(1 << 16)):
            out += _inflate(d, block, n - len(out), path)
    if not out and not d.eof:  # ISA-L waits for more input where zlib already refuses the header
        raise InputError(path, "corrupt gzip data (the stream ends before any content)")
    return out


def _inflate(d: Any, data: bytes, max_length: int, path: Path) -> bytes:
    """At most ``max_length`` bytes of gzip member ``d``'s output for ``data``; corrupt data is the input's
    error."""
    try:
        return d.decompress(data, max_length)
    except inflate.error as e:
        raise InputError(path, f"corrupt gzip data ({e})") from None


class _CountingReader(io.RawIOBase):
    """Wraps a binary file and reports consumed bytes to a progress callback."""

    def __init__(self, f: io.BufferedReader, progress: Progress | None, digest: Any = None) -> None:
        self._f = f
        self._progress = progress
        self._digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = self._f.readinto(b)
        if self._digest is not None and n:
            self._digest.update(memoryview(b)[:n])
        if self._progress and n:
            self._progress(n)
        return n


class TruncatedInput(Exception):
    """The compressed stream ended before its end marker; the content yielded so far is valid."""


def _gunzip(f: io.BufferedReader, path: Path, block: int) -> Iterator[bytes]:
    """Decompress (possibly multi-member) gzip from ``f`` in bounded output blocks."""
    d = inflate.decompressobj(wbits=31)
    pending = b""
    while True:
        if not pending:
            pending = f.read(1 << 20)
            if not pending:
                if rest := d.flush():
                    yield rest
                if not d.eof:
                    raise TruncatedInput("the gzip stream ends early (file cut short)")
                return
        if d.eof:  # a further gzip member follows
            if not pending.lstrip(b"\0"):
                return
            d = inflate.decompressobj(wbits=31)
        out = _inflate(d, pending, block, path)
        pending = d.unconsumed_tail or d.unused_data
        if out:
            yield out


def iter_content(path: Path, progress: Progress | None = None, block: int = BLOCK) -> Iterator[bytes]:
    """Yield the decompressed content of ``path`` in blocks.

    A gzip stream that ends early yields what it had and then raises :class:`TruncatedInput`; corrupt
    gzip data raises :class:`InputError`.
    """
    check_readable(path)
    passes = _PASSES.get(os.path.realpath(path))
    digest = hashlib.sha256() if passes is not None else None
    raw = open(path, "rb")  # noqa: SIM115 - closed in finally
    try:
        counted = io.BufferedReader(_CountingReader(raw, progress, digest), buffer_size=1 << 20)
        if not is_gzip(path):
            if path.name.endswith(".gz"):
                raise InputError(path, "named .gz but is not gzip data")
            while data := counted.read(block):
                yield data
        else:
            yield from _gunzip(counted, path, block)
        if digest is not None and passes is not None:  # a complete pass: what the decoder did not need too
            while rest := raw.read(BLOCK):
                digest.update(rest)
            passes.append(digest.hexdigest())
    finally:
        raw.close()


_DONE = object()


def prefetched(blocks: Iterator[bytes], depth: int = 2) -> Iterator[bytes]:
    """``blocks`` produced by a background thread, at most ``depth`` ahead of the consumer.

    Reading and gunzip (the inflate releases the GIL) then overlap with decoding on another core; memory stays
    bounded by ``depth`` blocks. Exceptions from ``blocks`` are raised in the consumer, in order; a
    consumer that stops early stops the thread (which closes the file).
    """
    out: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for block in blocks:
                if not put(block):
                    return
            put(_DONE)
        except BaseException as e:  # handed to the consumer, raised there
            put(e)
        finally:
            close = getattr(blocks, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="traceq-read", daemon=True)
    worker.start()
    try:
        while True:
            item = out.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
