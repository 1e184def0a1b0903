"""The metric definitions in ``queries/``: finding them, reading their headers, running them.

Each ``queries/NAME.sql`` holds one SELECT whose result is the metric ``NAME``; files starting with ``_``
are building blocks. A file names the blocks it uses in a ``-- Requires: _a, _b`` header line; they are
defined as temporary views before the query runs, in dependency order, so a definition is written once
and reused, never copied. Users' SQL (``traceq sql``) may name any metric or block as a table: the names
it uses (:func:`used_queries`) are bound as views before it runs, and only those (with what they require).
"""

from __future__ import annotations

import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from traceq.errors import QueryError, as_text

if TYPE_CHECKING:  # imported by list_queries: users' SQL and the list of queries run without Polars
    import polars as pl

_REQUIRES = re.compile(r"^--\s*Requires:\s*(.+)$", re.M | re.I)
_NAME = re.compile(r"^_?[a-z][a-z0-9_]*$")


#: The longest query name (a file name's length is bounded by the file system: 255 bytes on most).
MAX_NAME_CHARS = 128
#: The largest SQL file ``traceq sql -f`` reads, bytes.
MAX_SQL_FILE_BYTES = 1 << 20


@cache
def _queries_dir() -> Path:
    """The folder of the query files (the package ``traceq.queries``, installed as files: read by path,
    without ``importlib.resources`` and its zip reader, 2 ms of every command's start)."""
    import importlib.util

    spec = importlib.util.find_spec("traceq.queries")
    if spec is None or not spec.submodule_search_locations:
        raise QueryError("traceq.queries: the query files are not installed (reinstall traceq)")
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def query_text(name: str) -> str:
    """The SQL of the query or building block ``name`` (each file read once: a report checks the stored
    results of every metric against the files they are made from)."""
    if not _NAME.match(name) or len(name) > MAX_NAME_CHARS:
        shown = name if len(name) <= MAX_NAME_CHARS else f"{name[:40]}... ({len(name):,} characters)"
        raise QueryError(f"{shown}: not a query name (letters, digits and _, at most {MAX_NAME_CHARS})")
    path = _queries_dir() / f"{name}.sql"
    if not path.is_file():
        raise QueryError(f"{name}: no such query (see `traceq queries`)")
    return path.read_text()


def read_sql_file(path: str | os.PathLike[str]) -> str:
    """The text of an SQL file: a regular file (not a pipe or a device, which may never end) of at most
    :data:`MAX_SQL_FILE_BYTES`, in UTF-8; anything else is a :class:`QueryError` naming the file."""
    try:
        with open(path, "rb", opener=lambda p, flags: os.open(p, flags | os.O_NONBLOCK)) as f:  # a FIFO: no wait
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise QueryError(f"{as_text(path)}: not a regular file (an SQL file is read whole)")
            data = f.read(MAX_SQL_FILE_BYTES + 1)
    except OSError as e:
        raise QueryError(f"{as_text(path)}: {e.strerror or e}") from None
    if len(data) > MAX_SQL_FILE_BYTES:
        raise QueryError(f"{as_text(path)}: larger than {MAX_SQL_FILE_BYTES >> 20} MB (not an SQL file)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise QueryError(f"{as_text(path)}: not a text file (invalid UTF-8)") from None


def requires(sql_text: str) -> list[str]:
    """Building blocks named in the ``-- Requires:`` header lines of ``sql_text``."""
    names: list[str] = []
    for m in _REQUIRES.finditer(sql_text):
        names += [n.strip() for n in m.group(1).split(",") if n.strip()]
    return names


@cache
def query_names() -> frozenset[str]:
    """The name of every query file: the metrics and the building blocks."""
    root = _queries_dir()
    return frozenset(e.name[:-4] for e in root.iterdir() if e.name.endswith(".sql") and _NAME.match(e.name[:-4]))


def used_queries(sql_text: str) -> list[str]:
    """The query files a statement needs: those its ``-- Requires:`` lines name, then every metric or
    block whose name it uses as a word outside ``--`` comments, in order of first use (a word that is no
    table there, such as a column or a string, only binds a view that is never read)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"--[^\n]*", "", sql_text))  # comments left out
    used = requires(sql_text) + [w for w in words if w in query_names()]
    return list(dict.fromkeys(used))


def dependency_order(sql_text: str) -> list[tuple[str, str]]:
    """(name, sql) of every query file ``sql_text`` needs (:func:`used_queries`), each after the blocks it
    needs."""
    ordered: list[tuple[str, str]] = []
    seen: set[str] = set()

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if name in stack:
            raise QueryError(f"circular Requires: {' -> '.join((*stack, name))}")
        if name in seen:
            return
        text = query_text(name)
        for dep in requires(text):
            visit(dep, (*stack, name))
        seen.add(name)
        ordered.append((name, text))

    for name in used_queries(sql_text):
        visit(name, ())
    return ordered


def doc(sql_text: str) -> dict[str, object]:
    """The header of a query file: summary line, documented columns (name -> (type, meaning)), the
    blocks it requires and the tables and blocks its ``-- Reads:`` lines name."""
    lines = [line[2:].strip() for line in sql_text.splitlines() if line.startswith("--")]
    summary = lines[0].split(":", 1)[1].strip() if lines and ":" in lines[0] else ""
    columns = {}
    section, reads = "", ""
    for line in lines:
        label = line.split(":", 1)[0].lower()
        if label in ("definition", "reads", "columns", "requires"):
            section = label
            line = line.split(":", 1)[1]
        if section == "reads":
            reads += " " + line
        m = re.match(r"^(\w+)\s+([A-Z]+(?:\[\])?)\s+(.+)$", line)  # a list type: VARCHAR[]
        if section == "columns" and m:
            columns[m.group(1)] = (m.group(2), m.group(3))
    return {"summary": summary, "columns": columns, "requires": requires(sql_text), "reads": _names(reads)}


def _names(text: str) -> list[str]:
    """The table names of a ``Reads:`` text (``events(run_id, ...), _windows.``: each name's columns in
    parentheses, ``nothing`` for none)."""
    while (bare := re.sub(r"\([^()]*\)", "", text)) != text:
        text = bare
    names = [part.strip().rstrip(".").split() for part in text.split(",")]
    return [words[0] for words in names if words and words[0] != "nothing"]


#: The columns of :func:`list_queries` (both text).
QUERY_LIST_COLUMNS = ("name", "summary")


def query_summaries() -> list[tuple[str, str]]:
    """Each metric query's name and summary line, by name (building blocks left out): the rows of
    :func:`list_queries`, read without Polars (``traceq queries``' table)."""
    entries = sorted(_queries_dir().iterdir(), key=lambda p: p.name)
    return [
        (entry.name[:-4], str(doc(entry.read_text())["summary"]))
        for entry in entries
        if entry.name.endswith(".sql") and not entry.name.startswith("_")
    ]


def list_queries() -> pl.DataFrame:
    """The metric queries (building blocks left out): ``name``, ``summary``."""
    import polars as pl

    return pl.DataFrame(query_summaries(), schema=dict.fromkeys(QUERY_LIST_COLUMNS, pl.String), orient="row")


def source_dir() -> Path:
    """Where the query files are on disk (for users who want to read or copy them)."""
    return _queries_dir()


def _digest(files: list[tuple[str, bytes]]) -> str:
    """A hash of query files (name, text), in name order, and of the macros they are expanded with
    (:mod:`traceq.querying.macros`)."""
    import hashlib  # (2 ms to import: only where a fingerprint is made, not at every command's start)

    digest = hashlib.sha256()
    for name, text in sorted(files):
        digest.update(name.encode() + b"\0" + text + b"\0")
    digest.update(b"macros.py\0" + _macros() + b"\0")
    return digest.hexdigest()[:16]


@cache
def _macros() -> bytes:
    return Path(__file__).with_name("macros.py").read_bytes()


@cache
def fingerprint() -> str:
    """A hash of every query file's text and of the macros (what a stored estimate's queries may read)."""
    root = _queries_dir()
    return _digest([(e.name, e.read_bytes()) for e in root.iterdir() if e.name.endswith(".sql")])


@cache
def metric_fingerprint(name: str) -> str:
    """A hash of the query files stored metric ``name`` is made from (its own and every block it requires,
    transitively) and of the macros: a stored result is used while these are unchanged, so a new version
    of traceq that changes one query recomputes only the metrics made from it."""
    return _digest([(f"{n}.sql", text.encode()) for n, text in dependency_order(name)])
