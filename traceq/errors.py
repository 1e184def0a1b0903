"""traceq's exceptions. Every message is one line that names the input and the problem, in valid Unicode (the
bytes of a name that are not UTF-8 as U+FFFD: :func:`as_text`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

#: Lone surrogates: how Python holds the bytes of a file name or argument that are not UTF-8.
_SURROGATE = re.compile("[\ud800-\udfff]")


def as_text(text: object) -> str:
    """``text`` as valid Unicode: each byte of a name that is not UTF-8 (``\\udcff``) as U+FFFD, as
    Parquet, Arrow and every output can hold it."""
    return _SURROGATE.sub("\ufffd", str(text))


def not_utf8(text: str) -> int | None:
    """The first byte of ``text`` that was not UTF-8 where it came from (an argument, a file name), or
    None if ``text`` is valid Unicode."""
    m = _SURROGATE.search(text)
    if m is None:
        return None
    code = ord(m.group())
    return code - 0xDC00 if 0xDC80 <= code <= 0xDCFF else code


class TraceqError(Exception):
    """A problem the user can act on; the CLI prints it as one line and exits non-zero."""


class InputError(TraceqError):
    """An input file cannot be read as a trace."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(as_text(f"{self.path}: {problem}"))


class StoreError(TraceqError):
    """The store cannot be opened, read or written."""


class QueryError(TraceqError):
    """A SQL query was rejected or failed."""


def os_problem(e: OSError) -> str:
    """An operating system's error in one line: the file it names (where it names one) and its words, such as
    ``STORE/runs/.../events.parquet: Permission denied``."""
    words = e.strerror or str(e) or type(e).__name__
    named = [as_text(f) for f in (e.filename, e.filename2) if f is not None]
    return f"{' -> '.join(named)}: {words}" if named else words


@contextmanager
def spill_io(folder: object, verb: str) -> Iterator[None]:
    """I/O in a spill folder, which belongs to the store: its errors (a full disk) are the store's, not
    the input's."""
    try:
        yield
    except OSError as e:
        raise StoreError(f"{folder}: cannot {verb} the store: {e.strerror or e}") from None
