"""The C chrome-trace decoder and the C nesting walk give exactly what the Python paths give.

The Python paths (msgspec decoding, the Python walk) are the reference: every real trace is read both
ways and compared column by column, and generated events with every JSON type in every field check
that the C decoder either agrees or hands the chunk back (never a different answer).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import hypothesis.strategies as st
import msgspec
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from polars.testing import assert_frame_equal

from tests.conftest import SAMPLES, chrome_traces, run_cli, shared
from traceq.analysis.replay import engine as replay_engine
from traceq.model import nesting
from traceq.readers import read_trace
from traceq.readers.chrome import columns, decoder
from traceq.readers.source import prefetched


def _require_native() -> None:
    if not decoder.native_available() or nesting._nest_scan is None or replay_engine._replay_walk is None:
        if os.environ.get("TRACEQ_ALLOW_NO_NATIVE") == "1":
            pytest.skip("native parts not built on this install")
        pytest.fail("the C extensions were not built (no compiler at install?); TRACEQ_ALLOW_NO_NATIVE=1 skips")


def test_both_decoders_follow_the_one_declaration_of_the_columns() -> None:
    """The columns, their kinds and the args keys are declared once (``columns.py``): the msgspec path's
    schema and typed args are made from it, and the C scanner reports what it was compiled with (a
    scanner built from another declaration, or not rebuilt since it changed, fails here)."""
    declared = columns.columns()
    assert tuple(decoder._FRAME_SCHEMA) == tuple(name for name, _ in declared)
    arg_fields = msgspec.structs.fields(decoder.KnownArgs)
    assert [(f.encode_name, f.name) for f in arg_fields] == [(key, column) for key, column, _ in columns.ARG_COLUMNS]
    _require_native()
    assert tuple(name for name, _ in declared) == decoder._scan.COLUMNS
    assert tuple(kind for _, kind in declared) == decoder._scan.KINDS
    assert tuple((key, column) for key, column, _ in columns.ARG_COLUMNS) == decoder._scan.ARG_KEYS


@pytest.mark.parametrize("path", chrome_traces(), ids=lambda p: p.name)
def test_real_traces_decode_identically(path: Path) -> None:
    _require_native()
    ref = decoder.read_chrome_trace(path, native=False)
    got = decoder.read_chrome_trace(path, native=True)
    assert got.decoded_by["python"] == 0 and got.decoded_by["native"] >= 1  # no chunk fell back
    assert ref.decoded_by["native"] == 0
    assert_frame_equal(got.events, ref.events)
    assert got.metadata_events == ref.metadata_events
    assert got.skipped == ref.skipped
    assert got.meta == ref.meta
    assert got.warnings == ref.warnings


def test_small_chunks_decode_identically() -> None:
    """Many chunk boundaries: each chunk is decoded on its own and the frames are concatenated."""
    _require_native()
    path = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    ref = decoder.read_chrome_trace(path, native=False, chunk=1 << 18)
    got = decoder.read_chrome_trace(path, native=True, chunk=1 << 18)
    assert got.decoded_by["native"] > 10
    assert_frame_equal(got.events, ref.events)


def _paddle_with_broken_names(tmp_path: Path) -> Path:
    """The Paddle-layout sample with unescaped quotes in every 16th ``aten::addmm`` name (4 of them): the
    C decoder hands those bodies back, and they are decoded once repaired."""
    text = gzip.decompress((SAMPLES / "paddlefmt_conformer_fp16_b64_2steps.json.gz").read_bytes()).decode()
    parts = text.split('"name": "aten::addmm[')
    assert len(parts) > 32
    path = tmp_path / "broken.paddle_trace.json"
    path.write_text(
        "".join(
            part + ('"name": "aten::addmm "fused" x[' if i % 16 == 0 else '"name": "aten::addmm[')
            for i, part in enumerate(parts[:-1])
        )
        + parts[-1]
    )
    return path


@pytest.mark.parametrize("label", ["kineto", "paddle_cpu", "paddle_repaired"])
def test_decode_threads_add_the_events_in_the_trace_order(
    label: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies decoded on several threads at once give exactly the one-at-a-time read, handed-back bodies
    (repaired by the msgspec path) included; 16 KB bodies make many of them."""
    _require_native()
    path = {
        "kineto": SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
        "paddle_cpu": SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
        "paddle_repaired": None,
    }[label] or _paddle_with_broken_names(tmp_path)
    reads = {}
    for threads in (1, 4):
        monkeypatch.setattr(decoder, "DECODE_THREADS", threads)
        monkeypatch.setattr(decoder.pl, "thread_pool_size", lambda: 4)
        reads[threads] = decoder.read_chrome_trace(path, chunk=1 << 14)
    one, several = reads[1], reads[4]
    assert several.decoded_by["native"] > 8
    assert several.decoded_by == one.decoded_by
    assert_frame_equal(several.events, one.events)
    assert several.metadata_events == one.metadata_events
    assert several.skipped == one.skipped and several.meta == one.meta and several.warnings == one.warnings
    if label == "paddle_repaired":  # handed back as they were, decoded once repaired
        assert "4 events had unescaped or invalid characters and were repaired" in several.warnings


# ---- generated events ------------------------------------------------------------------------------

_KNOWN_ARGS = [
    "External id",
    "correlation",
    "correlation id",
    "device",
    "stream",
    "bytes",
    "Bytes",
    "Input type",
    "Input Dims",
    "input_dtypes",
    "input_shapes",
    "start_time",
    "end_time",
    "name",
]
_text = st.text(max_size=12)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_json = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=8
)
_ids = st.one_of(
    st.none(),
    st.integers(-(2**62), 2**62),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: float(round(f))),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "123(Python)", "stream 7", "GPU 0"]),
    _text,
)
_times = st.one_of(
    st.none(),
    st.integers(0, 2**60),
    st.floats(0, 2e15, allow_nan=False),
    st.integers(0, 10**15).map(lambda v: v / 1000),
)
_args_any = st.dictionaries(st.sampled_from([*_KNOWN_ARGS, "other", "Ev Idx"]), _json, max_size=6)
_args_typed = st.fixed_dictionaries(
    {},
    optional={
        "External id": st.integers(-(2**62), 2**62),
        "correlation": st.integers(0, 2**40),
        "device": st.integers(0, 8),
        "stream": st.integers(0, 200),
        "Bytes": st.integers(0, 2**40),
        "Input type": st.lists(st.one_of(st.none(), _text), max_size=4),
        "Input Dims": _json,
        "start_time": _text,
        "name": _text,
        "other": _json,
    },
)


def _event(args: st.SearchStrategy, ids: st.SearchStrategy, strings: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {"ph": st.sampled_from(["X", "i", "I", "M", "s", "f", "B", "", "XY"])},
        optional={
            "cat": strings,
            "name": strings,
            "pid": ids,
            "tid": ids,
            "ts": _times,
            "dur": _times,
            "args": args,
            "id": _json,
        },
    )


_any_event = _event(st.one_of(_args_any, _json), _ids, st.one_of(_text, st.none(), _json))
_typed_event = _event(_args_typed, st.one_of(st.none(), st.integers(0, 2**40), _text), st.one_of(_text, st.none()))


def _body(events: list[dict], indent: int | None, ascii_only: bool) -> bytes:
    return ",\n".join(json.dumps(e, indent=indent, ensure_ascii=ascii_only) for e in events).encode()


def _decode(body: bytes, native: bool) -> decoder._Decoder:
    body_decoder = decoder.body_decoder(native)
    body_decoder._try_decode(body)
    body_decoder.chunks.finish()
    return body_decoder


def _assert_same(got: decoder._Decoder, ref: decoder._Decoder) -> None:
    assert got.n_events == ref.n_events
    if len(ref.chunks):
        assert_frame_equal(got.chunks.concat(), ref.chunks.concat())
    assert got.metadata_events == ref.metadata_events
    assert got.skipped == ref.skipped


_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_generated(events: list[dict], indent: int | None, ascii_only: bool, must_be_native: bool) -> None:
    """What the C decoder takes from the generated body equals the reference (and it takes the body
    where ``must_be_native``)."""
    _require_native()
    body = _body(events, indent, ascii_only)
    got = _decode(body, native=True)
    if must_be_native:
        assert got.decoded_by["native"] == 1, "the C decoder handed back ordinary events"
    if got.decoded_by["native"]:
        _assert_same(got, _decode(body, native=False))


@pytest.mark.slow
@_SETTINGS
@given(st.lists(_any_event, min_size=1, max_size=8), st.sampled_from([None, 0, 2]), st.booleans())
def test_any_events_decode_identically_or_fall_back(events: list[dict], indent: int | None, ascii_only: bool) -> None:
    _check_generated(events, indent, ascii_only, must_be_native=False)


@pytest.mark.slow
@_SETTINGS
@given(st.lists(_typed_event, min_size=1, max_size=8), st.sampled_from([None, 0, 2]), st.booleans())
def test_well_typed_events_are_decoded_natively(events: list[dict], indent: int | None, ascii_only: bool) -> None:
    _check_generated(events, indent, ascii_only, must_be_native=True)


@pytest.mark.parametrize(
    "body",
    [
        b'{"ph": "X", "name": "a\x01b"}',  # a control character inside a string
        b'{"ph": "X", "name": "\xff"}',  # invalid UTF-8
        b'{"ph": "X", "name": "a"},',  # a trailing comma
        b'{"ph": "X", "ts": "12"}',  # a time written as text
        b'{"ph": "X", "name": "\\ud800"}',  # a lone surrogate
        b'{"ph": "X", "pid": true}',
        b'{"ph": "X", "na\\u006de": "escaped key"}',
        b'{"ph": "X"} {"ph": "X"}',
        b'{"ph": "X", "cname": "a\\ud800b"}',  # a lone high surrogate, even in a field not kept
        b'{"ph": "X", "cname": "\\udc00"}',  # a lone low surrogate
        b'{"ph": "X", "ts": 51311821e999581240}',  # out of the float range
        b'{"ph": "f", "ts": 1.5e999}',  # out of range in an event that is not kept
        b'{"ph": 698, "ph": "X"}',  # a repeated key whose first value has the wrong type
    ],
)
def test_input_the_c_decoder_hands_back(body: bytes) -> None:
    _require_native()
    assert decoder._scan.decode(body) is None


@pytest.mark.parametrize(
    "number",
    ["1669783689681788.0", "1669783689681788.000", "9007199254740993.0", "9007199254740993.10", "12.50",
     "123456789012345678.0", "1.0000000000000000000000", "0.000", "-0.0", "-12.340", "7.00e2"],
)  # fmt: skip
def test_numbers_with_trailing_fraction_zeros_decode_identically(number: str) -> None:
    """Trailing zeros are dropped before the exact fast path; the value is still msgspec's."""
    _require_native()
    body = (
        f'{{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": {number}, "dur": {number}}},'
        f'{{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": {number}, "dur": 1.0}}'
    ).encode()
    got = _decode(body, native=True)
    assert got.decoded_by["native"] == 1
    _assert_same(got, _decode(body, native=False))


def _mutated_bodies(seed: int, n: int) -> list[bytes]:
    """Runs of real events, cut at event boundaries, with a few bytes changed, inserted or removed."""
    rng = random.Random(seed)
    pieces = []
    for path in (
        SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
        SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
    ):
        with gzip.open(path) as f:
            text = f.read()
        start = text.index(b"[", text.index(b'"traceEvents"')) + 1
        pieces.append(re.split(rb"(?<=\})\s*,\s*(?=\{)", text[start : start + 300_000])[:-1])
    alphabet = b'"\\{}[],:0123456789eE.-+ntfu \x00\xff\xc3'
    bodies = []
    for _ in range(n):
        events = rng.choice(pieces)
        k = rng.randrange(len(events) - 10)
        body = bytearray(b",".join(events[k : k + rng.randint(1, 6)]))
        for _ in range(rng.randint(0, 2)):
            i = rng.randrange(len(body))
            op = rng.random()
            if op < 0.4:
                body[i] = rng.randrange(256)
            elif op < 0.7:
                body[i:i] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))
            else:
                del body[i : i + rng.randint(1, 12)]
        bodies.append(bytes(body))
    return bodies


@pytest.mark.slow
def test_mutated_real_events_decode_identically_or_fall_back() -> None:
    _require_native()
    accepted = 0
    for body in _mutated_bodies(20261130, 3000):
        got = _decode(body, native=True)
        if got.decoded_by["native"]:
            accepted += 1
            ref = decoder.body_decoder(native=False)
            assert ref._try_decode(body), body  # never accepts what the reference refuses
            ref.chunks.finish()
            _assert_same(got, ref)
    assert accepted > 500  # most mutations keep the JSON valid


# ---- nesting -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/conformer_fp16_b4.json.gz",
        "hta/trace_diff/test/test.json.gz",
        "paddle/cpu_paddle_3.3.1/paddle_fp32.paddle_trace.json.gz",
        "paddle-gpu-layout/paddlefmt_conformer_fp32_b64.json.gz",
        "nsys/nsys_conformer_fp16_b4.sqlite.gz",
    ],
)
def test_nesting_walks_agree(rel: str) -> None:
    _require_native()
    events = read_trace(shared(rel)).tables.events
    for tolerance in (0, 1000):
        ref = nesting._nest_containers(events, tolerance, native=False)
        got = nesting._nest_containers(events, tolerance, native=True)
        assert ref.height > 1000
        assert_frame_equal(got, ref)
        assert got["depth"].max() >= 2  # a real tree, not a flat list
        ref_all = nesting.nest_host_events(events, tolerance, native=False)
        got_all = nesting.nest_host_events(events, tolerance, native=True)
        assert_frame_equal(got_all, ref_all)
        calls = events.filter(pl.col("kind") == "runtime")["event_id"]
        assert ref_all.height == ref.filter(pl.col("kind") != "annotation").height + calls.len()
        if calls.len():  # calls were placed under ranges
            placed = got_all.filter(pl.col("event_id").is_in(calls.implode()))["parent_id"]
            assert placed.null_count() < calls.len()


# ---- background reading --------------------------------------------------------------------------------


def test_prefetched_keeps_order_and_raises_in_the_consumer() -> None:
    def blocks():
        yield b"a"
        yield b"b"
        raise ValueError("broken input")

    got = []
    with pytest.raises(ValueError, match="broken input"):
        for block in prefetched(blocks()):
            got.append(block)
    assert got == [b"a", b"b"]


def test_prefetched_stops_its_thread_when_the_consumer_stops() -> None:
    closed = threading.Event()

    def blocks():
        try:
            for i in range(1_000_000):
                yield str(i).encode()
        finally:
            closed.set()

    stream = prefetched(blocks(), depth=2)
    assert next(stream) == b"0"
    stream.close()
    assert closed.wait(5)
    assert not any(t.name == "traceq-read" and t.is_alive() for t in threading.enumerate())


def test_version_says_whether_the_c_parts_are_built() -> None:
    _require_native()
    result = run_cli("version")
    assert result.returncode == 0
    assert "chrome decoder: built; nesting: built; replay: built" in result.stdout


def test_the_c_parts_load_without_their_packages_and_import_as_the_same_module() -> None:
    """``traceq version`` loads the C parts alone: neither their packages (which import the readers and
    Polars) nor Polars are imported for it, and a later import of a part gives the module loaded."""
    _require_native()
    probe = (
        "import sys\n"
        "from traceq._utils.native import PARTS, load\n"
        "loaded = {name: load(name) for name in PARTS.values()}\n"
        "print(sorted(m for m in ('polars', 'pyarrow', 'traceq.readers', 'traceq.model') if m in sys.modules))\n"
        "import importlib\n"
        "print(all(importlib.import_module(name) is module for name, module in loaded.items()))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "True"]


def test_version_says_the_python_paths_are_in_use_when_the_c_parts_are_switched_off() -> None:
    result = run_cli("version", env={"TRACEQ_NATIVE": "0"})
    assert result.returncode == 0
    assert (
        "chrome decoder: not in use (Python path); nesting: not in use (Python path); replay: not in use (Python path)"
        in result.stdout
    )
