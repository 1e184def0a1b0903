"""Chrome trace JSON, decoded in bounded chunks into Arrow columns.

Handles both top-level forms (``{"traceEvents": [...], ...}`` and a bare array), gzip, a missing end
(a profiler killed mid-write: everything up to the last complete event is kept, with a warning),
Paddle's trailing ``{}`` and its names written without JSON escaping. Producer-specific meaning
(categories, arg names) is left to the flavour modules; this module only decodes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import msgspec
import polars as pl
import pyarrow as pa

from traceq._utils.in_order import InOrder
from traceq._utils.memory import heap_reused
from traceq._utils.native import DECODER, load
from traceq._utils.words import count
from traceq.errors import InputError
from traceq.readers.chrome import columns
from traceq.readers.chunks import Chunks
from traceq.readers.source import Progress, TruncatedInput, iter_content, prefetched

#: The C decoder (same columns; about 3x faster than the msgspec path on decoding alone).
_scan = load(DECODER)

#: Bytes of JSON decoded at a time (their events are gathered into :class:`Chunks`).
CHUNK = 4 << 20
_HEAD_LIMIT = 64 << 20
#: Bytes that may pile up without one complete event before the file is refused (bounded memory).
MAX_PENDING = 256 << 20
#: The most bodies the C decoder works on at once, on threads of their own (it runs without the GIL);
#: fewer where Polars' pool is smaller (a worker of a multi-file ingest gets its share of the cores).
DECODE_THREADS = 4
_WHITESPACE = b"\xef\xbb\xbf \t\r\n"
_NOT_BLANK = re.compile(rb"[^\xef\xbb\xbf \t\r\n]")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*(?=\{)")
_LAST_BOUNDARY_WINDOW = 1 << 16
#: Paddle writes names with printf, unescaped: ``"name": "a "quoted" op[1.2 us]", "pid": ...``.
_PADDLE_NAME = re.compile(rb'^(\s*\{?\s*"name": ")(.*)(", "pid": )', re.M)
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
#: Phases kept as events: complete ranges and instants. Others are counted as skipped.
_KEPT_PHASES = {"X": "X", "i": "i", "I": "i"}


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: str | None = None
    pid: int | float | str | None = None
    tid: int | float | str | None = None
    ts: float | None = None
    dur: float | None = None
    args: msgspec.Raw = msgspec.Raw()


#: The columns of each kind of :mod:`~traceq.readers.chrome.columns` (the one declaration both decoders follow).
_DTYPES = {"str": pl.String, "f64": pl.Float64, "i64": pl.Int64, "list": pl.List(pl.String), "json": pl.String}
#: The type of an ``args`` value of each kind, and its default (no value).
_ARG_TYPES = {
    "i64": (int | None, None),
    "str": (str | None, None),
    "list": (list[Any] | None, None),
    "json": (msgspec.Raw, msgspec.field(default_factory=msgspec.Raw)),
}
#: The decoded columns, in the order of the declaration (the C decoder's order too).
_FRAME_SCHEMA = {name: _DTYPES[kind] for name, kind in columns.columns()}

#: The arg keys the readers give columns to (Kineto and Paddle spellings). Others stay in ``args``.
KnownArgs = msgspec.defstruct(
    "KnownArgs",
    [(column, *_ARG_TYPES[kind]) for _, column, kind in columns.ARG_COLUMNS],
    rename={column: key for key, column, _ in columns.ARG_COLUMNS},
    module=__name__,
    gc=False,
)
#: Fields kept as their JSON text (shapes and types written as nested lists), and lists of texts.
_RAW_FIELDS = tuple(column for _, column, kind in columns.ARG_COLUMNS if kind == "json")
_LIST_FIELDS = tuple(column for _, column, kind in columns.ARG_COLUMNS if kind == "list")
_ARG_FIELDS = msgspec.structs.fields(KnownArgs)
#: The same keys with every value left as JSON text: the lenient path converts them one by one.
_RawArgs = msgspec.defstruct(
    "_RawArgs",
    [(f.name, msgspec.Raw, msgspec.field(default_factory=msgspec.Raw)) for f in _ARG_FIELDS],
    rename={f.name: f.encode_name for f in _ARG_FIELDS},
    gc=False,
)
_RAW_ARGS = msgspec.json.Decoder(_RawArgs)
_EVENTS_DECODER = msgspec.json.Decoder(list[_Event])
#: The events of an array holding other values too (a number, a string, ``null``, ``true``, ``[]``).
_ELEMENTS_DECODER = msgspec.json.Decoder(list[Union[_Event, int, float, str, bool, list, None]])  # noqa: UP007
#: What a failed decode raises: invalid JSON, or values nested deeper than msgspec recurses.
_DECODE_ERRORS = (msgspec.DecodeError, RecursionError)
_ONE_EVENT = msgspec.json.Decoder(_Event)
_ARGS_DECODER = msgspec.json.Decoder(list[KnownArgs])
_ONE_ARGS = msgspec.json.Decoder(KnownArgs)
_ANY = msgspec.json.Decoder()


@dataclass
class ChromeTrace:
    """What a chrome-trace file holds, decoded but not yet interpreted."""

    meta: dict[str, Any]
    #: The event columns (see :func:`read_chrome_trace`), chunk by chunk as decoded.
    chunks: Chunks
    metadata_events: list[dict[str, Any]]
    skipped: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    #: Chunks decoded by each path: ``native`` (the C decoder) and ``python`` (msgspec, also repairing).
    decoded_by: Counter[str] = field(default_factory=Counter)

    @property
    def events(self) -> pl.DataFrame:
        """Every event's columns as one frame (for small traces and tests; readers go chunk by chunk)."""
        return self.chunks.concat()


def native_available() -> bool:
    """Whether the C decoder was built at install."""
    return _scan is not None


def read_chrome_trace(
    path: Path,
    progress: Progress | None = None,
    chunk: int | None = None,
    native: bool = True,
    spill_dir: Path | None = None,
) -> ChromeTrace:
    """Decode ``path`` (JSON or gzip JSON) into raw event columns.

    ``events`` has columns ``ph`` (``X`` or ``i``), ``cat``, ``name``, ``pid_raw``/``tid_raw`` (as text),
    ``ts_us``, ``dur_us``, ``args`` (JSON text) and one column per :class:`KnownArgs` field.
    ``native=False`` uses only the msgspec path (the reference the C decoder is tested against); with
    ``native=True`` the C decoder takes every chunk it can decode exactly and leaves the rest (broken
    or unusual input) to the msgspec path, which also repairs. With ``spill_dir`` the decoded chunks
    are written there as they come (memory stays bounded), else they are held in memory.
    """
    chunk = chunk or CHUNK
    blocks = prefetched(iter_content(path, progress, block=chunk))
    chunks = Chunks(_FRAME_SCHEMA, spill_dir)
    try:
        with heap_reused():  # and then handed back: the model build cannot reuse them
            return _Decoder(path, chunk, native and _scan is not None, chunks).run(blocks)
    except BaseException:
        chunks.close()
        raise


def body_decoder(native: bool, name: str = "body") -> _Decoder:
    """A decoder of event-array bodies (``_try_decode``, ``_decode_events``) into chunks held in memory,
    for checking and timing the decoders on bodies alone; call ``chunks.finish()`` before reading them."""
    return _Decoder(Path(name), CHUNK, native and _scan is not None, Chunks(_FRAME_SCHEMA))


class _Decoder:
    def __init__(self, path: Path, chunk: int, native: bool, chunks: Chunks) -> None:
        self.path = path
        self.chunk = chunk
        self.native = native
        self.meta: dict[str, Any] = {}
        self.chunks = chunks
        self.metadata_events: list[dict[str, Any]] = []
        self.skipped: Counter[str] = Counter()
        self.warnings: list[str] = []
        self.repaired = 0
        self.dropped = 0
        self.flattened = 0
        self.n_events = 0
        self.decoded_by: Counter[str] = Counter()
        #: The decode threads (None: one body at a time, here): bodies in flight, their results in order.
        threads = min(DECODE_THREADS, pl.thread_pool_size())
        self.decoding = InOrder("decode", threads, ahead=threads) if native and threads > 1 else None

    # -- driving -----------------------------------------------------------------------------------
    def run(self, blocks: Iterator[bytes]) -> ChromeTrace:
        # One growing buffer, consumed from the front in place: no new allocation (and page faults)
        # per block; bodies go to the decoder as views of it, or as copies to the decode threads, which
        # work on the next bodies while the oldest one's columns are added (in the trace's order).
        buf, bare = bytearray(), True
        try:
            self._read(blocks, buf, bare)
        finally:
            if self.decoding is not None:
                self.decoding.close()
        if self.n_events == 0 and not self.metadata_events:
            raise InputError(self.path, "a chrome trace with no events")
        if self.repaired:
            repaired = count(self.repaired, "event")
            were = "was" if self.repaired == 1 else "were"
            self.warnings.append(f"{repaired} had unescaped or invalid characters and {were} repaired")
        if self.dropped:
            dropped = count(self.dropped, "malformed event")
            self.warnings.append(f"{dropped} could not be decoded and {'was' if self.dropped == 1 else 'were'} skipped")
        if self.flattened:
            self.warnings.append(f"{self.flattened} values nested deeper than {_MAX_DEPTH} levels replaced by null")
        self.chunks.finish()
        return ChromeTrace(self.meta, self.chunks, self.metadata_events, self.skipped, self.warnings, self.decoded_by)

    def _read(self, blocks: Iterator[bytes], buf: bytearray, bare: bool) -> None:
        truncated = None
        try:
            head, bare = self._read_head(blocks)
            buf += head
            del head
            # Whitespace completes no event: searching the buffer again for each block of it took time growing
            # with the square of its length (92 s of CPU for 1.2 GB of it), and between events it is not kept.
            scanned = False  # whether buf was searched for events since its last non-whitespace bytes
            blank_buf = not _NOT_BLANK.search(buf)  # whether buf holds only whitespace
            for block in blocks:
                blank = not block.strip(_WHITESPACE)
                if blank and blank_buf:
                    continue
                buf += block
                scanned, blank_buf = scanned and blank, blank_buf and blank
                if len(buf) >= self.chunk and not scanned:
                    buf = self._consume_front(buf)
                    scanned, blank_buf = True, not _NOT_BLANK.search(buf)
                if len(buf) > MAX_PENDING:
                    if not _NOT_BLANK.search(buf):  # (strip would copy the window)
                        buf.clear()  # padding: nothing to keep
                        continue
                    raise InputError(
                        self.path, f"no complete event in {len(buf) >> 20} MB: not a chrome trace, or corrupt"
                    )
        except TruncatedInput as e:
            truncated = str(e)
        self._finish(buf, bare, truncated)

    def _read_head(self, blocks: Iterator[bytes]) -> tuple[bytes, bool]:
        """Consume bytes up to the start of the event array; return the rest and whether it is bare."""
        buf = b""
        for block in blocks:
            buf += block
            start = len(buf) - len(buf.lstrip(_WHITESPACE))
            if start >= len(buf):
                buf = b""  # only whitespace so far: keep nothing (bounded memory)
                continue
            first = buf[start : start + 1]
            if first == b"[":
                return buf[start + 1 :], True
            if first != b"{":
                raise InputError(self.path, "not JSON (expected a chrome trace object or array)")
            m = _EVENTS_KEY.search(buf)
            if m:
                self.meta.update(_parse_object(buf[start : m.start()].rstrip().rstrip(b",") + b"}"))
                return buf[m.end() :], False
            if len(buf) > _HEAD_LIMIT:
                break
        if not buf.strip(b"\xef\xbb\xbf \t\r\n"):
            raise InputError(self.path, "empty file")
        if buf.lstrip()[:1] == b"{":
            try:
                _ANY.decode(buf)
            except _DECODE_ERRORS:
                raise InputError(self.path, "not valid JSON") from None
            raise InputError(self.path, "JSON without a traceEvents array (not a chrome trace)")
        raise InputError(self.path, "not JSON (expected a chrome trace object or array)")

    def _consume_front(self, buf: bytearray) -> bytearray:
        """Decode all complete events at the front of ``buf`` and remove them from it (in place, or in
        a new buffer while something, such as a debugger holding frames, still references a view)."""
        cut = _last_boundary(buf)
        if cut is None:
            return buf
        if self.decoding is not None:
            with memoryview(buf) as view, view[: cut[0]] as body:
                self._settle(self.decoding.submit(_decode_native, bytes(body)))
            del buf[: cut[1]]
            return buf
        with memoryview(buf) as view:
            body = view[: cut[0]]
            try:
                self._decode_events(body)
            finally:
                body.release()
        try:
            del buf[: cut[1]]
        except BufferError:
            return bytearray(memoryview(buf)[cut[1] :])
        return buf

    def _settle(self, decoded: list[tuple[bytes, tuple | None]]) -> None:
        """Add the events of bodies the decode threads are done with, in order (the msgspec path takes
        those the C decoder handed back)."""
        for body, result in decoded:
            if result is None:
                self._decode_events(body, native=False)
                continue
            self._add_native(body, *result)
            self.decoded_by["native"] += 1

    def _finish(self, rest: bytearray, bare: bool, truncated: str | None) -> None:
        """Decode the last events and the metadata after the array; salvage a truncated end."""
        rest = self._consume_front(rest)
        if self.decoding is not None:
            self._settle(self.decoding.drain())
        buf = bytes(rest)
        if truncated is None:
            for close in _close_candidates(buf):
                body, tail = buf[:close].rstrip(), buf[close + 1 :].strip()
                tail_meta = _parse_tail(tail, bare)
                if tail_meta is None:
                    continue
                body = body.rstrip(b",")
                if body.strip() and not self._try_decode_repairing(body):
                    continue
                self.meta.update(tail_meta)
                return
        # No valid end: keep what is complete.
        kept = self._salvage(buf)
        lost = len(buf.strip()) - kept
        reason = truncated or "the event array is not closed (file cut short)"
        self.warnings.append(
            f"truncated: {reason}; read {self.n_events} events, {lost} bytes after the last complete event lost"
        )

    def _salvage(self, buf: bytes) -> int:
        """Decode the longest prefix of ``buf`` made of complete events; return its length."""
        ends = [m.start() + 1 for m in re.finditer(rb"\}", buf)]
        for end in reversed(ends[-64:]):
            body = buf[:end]
            if self._try_decode_repairing(body):
                return len(body.strip())
        return 0

    # -- decoding ----------------------------------------------------------------------------------
    def _try_decode(self, body: bytes | memoryview, native: bool = True) -> bool:
        if self.native and native:
            decoded = _scan.decode(body)
            if decoded is not None:
                self._add_native(body, *decoded)
                self.decoded_by["native"] += 1
                return True
        body = bytes(body)
        try:
            events = _EVENTS_DECODER.decode(b"[" + body + b"]")
        except _DECODE_ERRORS:
            try:
                elements = self._elements(body)
            except _DECODE_ERRORS:
                return False
            events = [e for e in elements if isinstance(e, _Event)]
            self.skipped["not an object"] += len(elements) - len(events)
        self._add(events)
        self.decoded_by["python"] += 1
        return True

    def _elements(self, body: bytes) -> list[Any]:
        """The values of an event array's ``body`` (events and anything else); values nested too deep for
        msgspec are replaced by null first (counted in :attr:`flattened`)."""
        try:
            return _ELEMENTS_DECODER.decode(b"[" + body + b"]")
        except RecursionError:
            body, n = _shallow(body)
            if not n:
                raise
        elements = _ELEMENTS_DECODER.decode(b"[" + body + b"]")
        self.flattened += n
        return elements

    def _try_decode_repairing(self, body: bytes | memoryview, native: bool = True) -> bool:
        """Decode ``body`` as is, else after repairing names and encoding; False if neither works.
        ``native=False``: the C decoder already failed on ``body`` as is."""
        if self._try_decode(body, native):
            return True
        body = bytes(body)
        fixed = _repair(body)
        if fixed != body and self._try_decode(fixed):
            self.repaired += _count_repairs(body)
            return True
        return False

    def _decode_events(self, body: bytes | memoryview, native: bool = True) -> None:
        if not self._try_decode_repairing(body, native):
            self._add(list(self._decode_one_by_one(_repair(bytes(body)))))
            self.decoded_by["python"] += 1

    def _decode_one_by_one(self, body: bytes) -> Iterable[_Event]:
        """Slow path: decode event by event, joining pieces split inside nested objects."""
        pieces = _BOUNDARY.split(body)
        i = 0
        while i < len(pieces):
            text = pieces[i]
            for j in range(i, min(i + 64, len(pieces))):
                if j > i:
                    text += b"}," + pieces[j]
                candidate = text if j == len(pieces) - 1 else text + b"}"
                try:
                    yield _ONE_EVENT.decode(candidate)
                except _DECODE_ERRORS:
                    continue
                self.repaired += 1 if j > i else 0
                i = j + 1
                break
            else:
                self.dropped += 1
                i += 1

    def _add(self, events: list[_Event]) -> None:
        kept: list[_Event] = []
        for e in events:
            ph = _KEPT_PHASES.get(e.ph)
            if ph is not None:
                e.ph = ph
                kept.append(e)
            elif e.ph == "M":
                self.metadata_events.append({"name": e.name, "pid": e.pid, "tid": e.tid, "args": _raw_to_obj(e.args)})
            else:
                self.skipped[f"ph={e.ph}" if e.ph else "empty"] += 1
        if kept:
            self.chunks.add(_to_frame(kept).to_arrow())
            self.n_events += len(kept)

    def _add_native(
        self, body: bytes | memoryview, n: int, columns: tuple, spans: list[tuple[int, int]], skipped: dict[str, int]
    ) -> None:
        for start, end in spans:
            e = _ONE_EVENT.decode(body[start:end])
            self.metadata_events.append({"name": e.name, "pid": e.pid, "tid": e.tid, "args": _raw_to_obj(e.args)})
        self.skipped.update(skipped)
        if n:
            self.chunks.add(_native_table(n, columns))
            self.n_events += n


def _decode_native(body: bytes) -> tuple[bytes, tuple | None]:
    """``body`` and what the C decoder makes of it (None: handed back), on a decode thread."""
    return body, _scan.decode(body)


def _native_table(n: int, columns: tuple) -> pa.Table:
    """The C decoder's buffers as an Arrow table of the columns of :data:`_FRAME_SCHEMA` that have a value
    in this chunk (the others are left out: no per-row nulls or string views for them)."""
    arrays, names = [], []
    for (name, dtype), buffers in zip(_FRAME_SCHEMA.items(), columns, strict=True):
        if buffers[1] == n:  # null_count: the column is empty in this chunk
            continue
        names.append(name)
        if dtype == pl.List(pl.String):
            valid, nulls, offsets, cvalid, cnulls, coffsets, cdata, cn = buffers
            child = pa.Array.from_buffers(pa.string(), cn, [_buf(cvalid), _buf(coffsets), _buf(cdata)], cnulls)
            lists = pa.list_(pa.string())
            arrays.append(pa.Array.from_buffers(lists, n, [_buf(valid), _buf(offsets)], nulls, 0, [child]))
        elif dtype == pl.String:
            valid, nulls, offsets, data = buffers
            arrays.append(pa.Array.from_buffers(pa.string(), n, [_buf(valid), _buf(offsets), _buf(data)], nulls))
        else:
            valid, nulls, data = buffers
            kind = pa.float64() if dtype == pl.Float64 else pa.int64()
            arrays.append(pa.Array.from_buffers(kind, n, [_buf(valid), _buf(data)], nulls))
    return pa.Table.from_arrays(arrays, names=names)


def _buf(data: bytes | None) -> pa.Buffer | None:
    return None if data is None else pa.py_buffer(data)


def _to_frame(events: list[_Event]) -> pl.DataFrame:
    raws = [e.args if len(e.args) else b"{}" for e in events]
    args_json = b"[" + b",".join(raws) + b"]"
    try:
        known = _ARGS_DECODER.decode(args_json)
    except _DECODE_ERRORS:
        known = [_lenient_args(r) for r in raws]
    cols: dict[str, Any] = {
        "ph": [e.ph for e in events],
        "cat": [e.cat for e in events],
        "name": [e.name for e in events],
        "pid_raw": [_id_text(e.pid) for e in events],
        "tid_raw": [_id_text(e.tid) for e in events],
        "ts_us": [e.ts for e in events],
        "dur_us": [e.dur for e in events],
        "args": [bytes(r).decode("utf-8", "replace") for r in raws],
    }
    for f in KnownArgs.__struct_fields__:
        values = [getattr(k, f) for k in known]
        if f in _RAW_FIELDS:  # JSON text; a JSON null is no value
            values = [bytes(v).decode("utf-8", "replace") if len(v) and bytes(v) != b"null" else None for v in values]
        elif f in _LIST_FIELDS:
            values = [None if v is None else [None if x is None else str(x) for x in v] for v in values]
        cols[f] = values
    return pl.DataFrame(cols, schema_overrides=_FRAME_SCHEMA, strict=False)


def _lenient_args(raw: Any) -> KnownArgs:
    """Decode one event's args, dropping known keys whose values have an unexpected type (each key on
    its own, so one bad value does not cost the others)."""
    try:
        return _ONE_ARGS.decode(raw)
    except _DECODE_ERRORS:
        pass
    try:
        raws = _RAW_ARGS.decode(raw)
    except _DECODE_ERRORS:
        return KnownArgs()  # args that are not an object
    values: dict[str, Any] = {}
    for f in _ARG_FIELDS:
        text = getattr(raws, f.name)
        if not len(text):
            continue
        if f.name in _RAW_FIELDS:
            values[f.name] = text
            continue
        try:
            values[f.name] = msgspec.json.decode(text, type=f.type)
        except (*_DECODE_ERRORS, msgspec.ValidationError):
            continue
    return KnownArgs(**values)


def _id_text(v: int | float | str | None) -> str | None:
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _raw_to_obj(raw: Any) -> dict[str, Any]:
    if raw is None or not len(raw):
        return {}
    try:
        obj = _ANY.decode(raw)
    except _DECODE_ERRORS:
        return {}
    return obj if isinstance(obj, dict) else {}


def _parse_object(text: bytes) -> dict[str, Any]:
    try:
        obj = _ANY.decode(text)
    except _DECODE_ERRORS:
        return {}
    return obj if isinstance(obj, dict) else {}


def _parse_tail(tail: bytes, bare: bool) -> dict[str, Any] | None:
    """Metadata after the event array, or None when ``tail`` cannot follow a closed array."""
    if bare:
        return {} if not tail else None
    if tail == b"}":
        return {}
    if tail.startswith(b","):
        obj = _parse_object(b"{" + tail[1:])
        return obj if obj or tail[1:].strip() == b"}" else None
    return None


def _close_candidates(buf: bytes) -> Iterator[int]:
    """Positions of ``]`` that may close the event array, last first."""
    pos = len(buf)
    for _ in range(256):
        pos = buf.rfind(b"]", 0, pos)
        if pos < 0:
            return
        yield pos


def _last_boundary(buf: bytes) -> tuple[int, int] | None:
    """(end of the last complete event, start of the next one) near the end of ``buf``."""
    lo = max(0, len(buf) - _LAST_BOUNDARY_WINDOW)
    while True:
        last = None
        for last in _BOUNDARY.finditer(buf, lo):  # noqa: B007 - we want the last match
            pass
        if last is not None:
            return last.start() + 1, last.end()
        if lo == 0:
            return None
        lo = max(0, len(buf) - (len(buf) - lo) * 8)  # a window 8 times wider


#: JSON strings and brackets, for :func:`_shallow`.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
#: Containers nested deeper than this cannot be decoded (msgspec recurses once per level, within
#: Python's recursion limit): :func:`_shallow` replaces them.
_MAX_DEPTH = 200


def _shallow(body: bytes) -> tuple[bytes, int]:
    """``body`` (events, without the array's brackets) with each value of an event's field (an ``args``
    value, say) that holds containers nested more than :data:`_MAX_DEPTH` deep replaced by ``null``; and
    how many were replaced."""
    out, last, stack, cut, n = [], 0, [], None, 0
    for m in _TOKENS.finditer(body):
        token = m.group()
        if token in (b"[", b"{"):
            stack.append(m.start())
            if len(stack) > _MAX_DEPTH and cut is None:
                cut = 2  # the value at depth 3: event {, field value {, its value
        elif token in (b"]", b"}") and stack:
            start = stack.pop()
            if cut is not None and len(stack) == cut:
                out += [body[last:start], b"null"]
                last, cut, n = m.end(), None, n + 1
    out.append(body[last:])
    return b"".join(out), n


def _repair(body: bytes) -> bytes:
    """Escape Paddle's unescaped names and replace invalid UTF-8 and control characters."""
    fixed = _PADDLE_NAME.sub(_escape_name, body)
    fixed = _CONTROL.sub(b" ", fixed)
    return fixed.decode("utf-8", "replace").encode("utf-8")


def _escape_name(m: re.Match[bytes]) -> bytes:
    inner = m.group(2)
    inner = re.sub(rb'\\(?!["\\/bfnrtu])', rb"\\\\", inner)
    inner = re.sub(rb'(?<!\\)"', rb'\\"', inner)
    return m.group(1) + inner + m.group(3)


def _count_repairs(body: bytes) -> int:
    n = 0
    for m in _PADDLE_NAME.finditer(body):
        if _escape_name(m) != m.group(0):
            n += 1
    n += len(_CONTROL.findall(body))
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        n += 1
    return max(n, 1)
