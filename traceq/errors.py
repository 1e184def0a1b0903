"""traceq's exceptions. Every message is one line that names the input and the problem."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TraceqError(Exception):
    """A problem the user can act on; the CLI prints it as one line and exits non-zero."""


class InputError(TraceqError):
    """An input file cannot be read as a trace."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class StoreError(TraceqError):
    """The store cannot be opened, read or written."""


class QueryError(TraceqError):
    """A SQL query was rejected or failed."""


@contextmanager
def spill_io(folder: object, verb: str) -> Iterator[None]:
    """I/O in a spill folder, which belongs to the store: its errors (a full disk) are the store's, not
    the input's."""
    try:
        yield
    except OSError as e:
        raise StoreError(f"{folder}: cannot {verb} the store: {e.strerror or e}") from None
