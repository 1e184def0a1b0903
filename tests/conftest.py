"""Shared fixtures: paths to the real traces, an independent raw-JSON loader, the command run in this process
(and, for a few end-to-end tests, in a subprocess), temporary stores, one store per shared trace pair
ingested once per session, and :class:`Ingested`: any set of traces ingested once per session, read in
place or copied for a test that writes.

With pytest-xdist each worker process has its own session: what is "once per session" here is once per
worker, and ``--dist loadfile`` keeps a file's tests (and so its module fixtures) on one worker."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: each worker builds its own
    fcntl = None  # type: ignore[assignment]

import traceq
from traceq.cli import app
from traceq.ingestion.ingest import run_name

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_traces"
SHARED = Path(os.environ.get("TRACEQ_SHARED", ROOT.parent / "shared")) / "traces"


def shared(rel: str) -> Path:
    path = SHARED / rel
    if not path.exists():
        pytest.fail(f"missing real trace {path} (set TRACEQ_SHARED to the shared materials)")
    return path


def chrome_traces() -> list[Path]:
    """Every chrome-trace JSON among the real traces and the bundled samples."""
    found = sorted(SHARED.glob("kineto/*.json.gz"))
    found += sorted(SHARED.glob("hta/**/*.json.gz"))
    found += sorted(SHARED.glob("paddle/**/*.json.gz"))
    found += sorted(SHARED.glob("paddle-gpu-layout/*.json.gz"))
    found += sorted(SAMPLES.glob("*.json.gz"))
    return found


def to_9_digits(v: object) -> object:
    """``v`` with every float to 9 significant digits (sums in another order differ in the last bits)."""
    if isinstance(v, float):
        return float(f"{v:.9g}")
    if isinstance(v, dict):
        return {k: to_9_digits(x) for k, x in v.items()}
    if isinstance(v, list):
        return [to_9_digits(x) for x in v]
    return v


@functools.lru_cache(maxsize=4)
def raw_trace(path: Path) -> dict:
    """The file parsed by the standard library alone: the independent reference for counts."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def repeated_gzip(path: Path, head: bytes, block: bytes, times: int, tail: bytes) -> None:
    """A gzip file of ``head + block * times + tail`` whose block is compressed once: after a full flush
    deflate starts afresh, so every copy of the block compresses to the same bytes (gzip.open compressing
    each copy cost seconds of CPU)."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert zlib.decompressobj(-zlib.MAX_WBITS).decompress(body * 2) == block * 2  # copies decode back to back
    last = deflate.compress(tail) + deflate.flush()
    crc = zlib.crc32(head)
    for _ in range(times):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(tail, crc)
    size = len(head) + len(block) * times + len(tail)
    with path.open("wb") as f:
        f.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first)  # gzip header: deflate, no name, level 9
        for _ in range(times):
            f.write(body)
        f.write(last + struct.pack("<II", crc, size & 0xFFFFFFFF))


def run_cli(
    *args: str, env: dict | None = None, cwd: Path | None = None, text: bool = True
) -> subprocess.CompletedProcess:
    """Run the ``traceq`` command in this process (typer's CliRunner): its exit code, stdout and stderr.
    An exception the command does not turn into an exit code is raised here, with its traceback."""
    with _working_dir(cwd):
        result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    stdout = result.stdout if text else result.stdout_bytes
    return subprocess.CompletedProcess(["traceq", *args], result.exit_code, stdout, result.stderr)


def run_process(
    *args: str, env: dict | None = None, cwd: Path | None = None, text: bool = True
) -> subprocess.CompletedProcess:
    """Run the real ``traceq`` entry point in a subprocess (end-to-end: exit codes, no traceback)."""
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args],
        capture_output=True,
        text=text,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=600,
    )


@contextlib.contextmanager
def _working_dir(path: Path | None) -> Iterator[None]:
    if path is None:
        yield
        return
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime, to prove nothing changed."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def window_offsets(store: Path, run: str | None = None, rank: int | None = None) -> dict[int, tuple[int, int]]:
    """traceq's analysis window of each step (``_windows``: a window ends when its step is done on the host
    and on the GPU) as ns offsets from the step's own start, so that a test computing from the raw file
    can place each window on the file's clock by the step event both read."""
    from traceq.querying.engine import query

    windows = query("_windows", store, run).filter(pl.col("step").is_not_null())
    if rank is not None:
        windows = windows.filter(pl.col("rank") == rank)
    return {
        r["step"]: (r["win_start"] - r["host_start"], r["win_end"] - r["host_start"])
        for r in windows.iter_rows(named=True)
    }


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@dataclass(frozen=True)
class PairStore:
    """A store holding a shared pair of traces as two runs, BASE and NEW (named after their files),
    ingested once per test session: tests only read it."""

    path: Path
    base: str
    new: str

    def run_id(self, name: str) -> str:
        return traceq.runs(self.path).filter(name=name)["run_id"][0]


def built_once(factory: pytest.TempPathFactory, key: str, build: Callable[[Path], object]) -> Path:
    """The folder ``build(folder)`` made, built once per test session even across pytest-xdist's workers
    (they share the parent of their temporary folders; one builds while the others wait on a lock), for
    fixtures whose tests only read what was built."""
    base = factory.getbasetemp()
    root = (base.parent if fcntl is not None and "PYTEST_XDIST_WORKER" in os.environ else base) / "built_once"
    root.mkdir(exist_ok=True)
    folder, done = root / key, root / f"{key}.done"
    with (root / f"{key}.lock").open("w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            done.touch()
    return folder


def _pair_store(factory: pytest.TempPathFactory, base: str, new: str) -> PairStore:
    root = built_once(  # BASE first: the older run
        factory, run_name(Path(new)), lambda d: traceq.ingest([shared(base), shared(new)], store=d / "store", jobs=1)
    )
    return PairStore(root / "store", run_name(Path(base)), run_name(Path(new)))


class Ingested:
    """Stores ingested once per session, keyed by what was ingested: ``store(*paths)`` is one to read
    only (shared by every test that asks for the same paths), ``copy(*paths, to=dir)`` a test's own copy
    to write to (copying a store costs a fraction of ingesting it again). The paths are ingested in order
    in this process (``jobs=1``: the first is the oldest run); ``name`` as in :func:`traceq.ingest`."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._stores: dict[tuple[tuple[str, ...], str | None], Path] = {}

    def store(self, *paths: str | Path, name: str | None = None) -> Path:
        key = (tuple(str(p) for p in paths), name)
        if key not in self._stores:
            root = self._factory.mktemp("ingested") / "store"
            traceq.ingest([Path(p) for p in paths], store=root, name=name, jobs=1)
            self._stores[key] = root
        return self._stores[key]

    def copy(self, *paths: str | Path, to: Path, name: str | None = None) -> Path:
        shutil.copytree(self.store(*paths, name=name), to)
        return to


@pytest.fixture(scope="session")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """Traces ingested once per session; see :class:`Ingested`."""
    return Ingested(tmp_path_factory)


@pytest.fixture(scope="session")
def kineto_b4(tmp_path_factory: pytest.TempPathFactory) -> PairStore:
    """The Kineto Conformer FP32/FP16 pair at batch 4."""
    return _pair_store(tmp_path_factory, "kineto/conformer_fp32_b4.json.gz", "kineto/conformer_fp16_b4.json.gz")


@pytest.fixture(scope="session")
def kineto_b64(tmp_path_factory: pytest.TempPathFactory) -> PairStore:
    """The Kineto Conformer FP32/FP16 pair at batch 64."""
    return _pair_store(tmp_path_factory, "kineto/conformer_fp32_b64.json.gz", "kineto/conformer_fp16_b64.json.gz")


@pytest.fixture(scope="session")
def nsys_b4(tmp_path_factory: pytest.TempPathFactory) -> PairStore:
    """The Nsight Systems exports of the Conformer FP32/FP16 pair at batch 4."""
    return _pair_store(
        tmp_path_factory, "nsys/nsys_conformer_fp32_b4.sqlite.gz", "nsys/nsys_conformer_fp16_b4.sqlite.gz"
    )


@pytest.fixture(scope="session")
def paddle_b64(tmp_path_factory: pytest.TempPathFactory) -> PairStore:
    """The Paddle-layout Conformer FP32/FP16 pair at batch 64."""
    return _pair_store(
        tmp_path_factory,
        "paddle-gpu-layout/paddlefmt_conformer_fp32_b64.json.gz",
        "paddle-gpu-layout/paddlefmt_conformer_fp16_b64.json.gz",
    )
