"""The columns the chrome-trace decoders fill, declared once.

Both decoders give every chunk of events the same columns, in this order: the C scanner (``_scan.c``,
compiled with the header :func:`c_header` writes at build time, see ``setup.py``) and the msgspec path
(:mod:`traceq.readers.chrome.decoder`, whose column schema and typed ``args`` struct are made from these
lists). A test compares the built scanner's own lists with these. This module imports nothing but the
standard library: ``setup.py`` runs it before traceq's dependencies are installed.

Kinds: ``str`` text; ``f64`` float; ``i64`` integer (a value of another JSON type is no value); ``list``
a list of texts; ``json`` the value's JSON text as written (shapes and types, nested lists).
"""

from __future__ import annotations

import json

#: The event's own fields, in order (their parsing is the format's: ``pid``/``tid`` as text, ``ts``/``dur``).
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ph", "str"),
    ("cat", "str"),
    ("name", "str"),
    ("pid_raw", "str"),
    ("tid_raw", "str"),
    ("ts_us", "f64"),
    ("dur_us", "f64"),
    ("args", "str"),
)

#: The ``args`` keys that get a column of their own (Kineto and Paddle spellings), after the event's:
#: (JSON key, column, kind). All args also stay, verbatim, in ``args``.
ARG_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("External id", "external_id", "i64"),
    ("correlation", "correlation", "i64"),
    ("correlation id", "correlation_id", "i64"),
    ("device", "device", "i64"),
    ("stream", "stream", "i64"),
    ("bytes", "bytes", "i64"),
    ("Bytes", "Bytes", "i64"),
    ("Input type", "input_type", "list"),
    ("Input Dims", "input_dims", "json"),
    ("input_dtypes", "input_dtypes", "json"),
    ("input_shapes", "input_shapes", "json"),
    ("start_time", "start_time", "str"),
    ("end_time", "end_time", "str"),
    ("name", "name_arg", "str"),
)

KINDS = ("str", "f64", "i64", "list", "json")


def columns() -> tuple[tuple[str, str], ...]:
    """Every column and its kind, in the decoders' order."""
    return (*EVENT_COLUMNS, *((column, kind) for _, column, kind in ARG_COLUMNS))


def c_header() -> str:
    """The C declarations of the columns, for ``_scan.c``: a ``COL_<name>`` index per column, each
    column's kind and name, and the table of ``args`` keys."""
    cols = columns()
    kinds = ", ".join(f"K_{kind.upper()}" for kind in KINDS)
    lines = [
        "/* Generated from traceq/readers/chrome/columns.py at build time: edit that file, not this one. */",
        f"enum {{ {kinds} }};",
        "enum {",
        *(f"    COL_{name}," for name, _ in cols),
        "    N_COLS",
        "};",
        f"#define FIRST_ARG_COL COL_{ARG_COLUMNS[0][1]}",
        "static const int KINDS[N_COLS] = {" + ", ".join(f"K_{kind.upper()}" for _, kind in cols) + "};",
        "static const char *const KIND_NAMES[] = {" + ", ".join(json.dumps(kind) for kind in KINDS) + "};",
        "static const char *const COLUMN_NAMES[N_COLS] = {" + ", ".join(json.dumps(name) for name, _ in cols) + "};",
        "/* Known args keys: the JSON key and its column. */",
        "typedef struct {",
        "    const char *key;",
        "    size_t len;",
        "    int col;",
        "} ArgKey;",
        "static const ArgKey ARG_KEYS[] = {",
        *(f"    {{{json.dumps(key)}, {len(key.encode())}, COL_{column}}}," for key, column, _ in ARG_COLUMNS),
        "};",
        "#define N_ARG_KEYS (sizeof ARG_KEYS / sizeof ARG_KEYS[0])",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(c_header(), end="")
