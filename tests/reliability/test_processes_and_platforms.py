"""Processes and platforms: workers end with a killed parent, a store being created is a store to
another process, and the platform-specific calls (the C library, /proc, sysconf, prctl) are optional."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import traceq.store as store_module
from tests.conftest import SAMPLES
from traceq._utils import memory, parent
from traceq.querying import engine
from traceq.store import Store

#: every case below is counted in the README's reliability tally
CASES: list[str] = []


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree in /proc")
def test_pool_workers_end_when_their_parent_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import time\nfrom traceq.ingestion.executors import run_tasks\n"
        "if __name__ == '__main__':\n    for _ in run_tasks(time.sleep, [120, 120], jobs=2):\n        pass\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 60
        while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the workers have started their tasks
        workers = _children(proc.pid)
        assert len(workers) >= 2
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while any(map(_running, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [w for w in workers if _running(w)]
    for w in left:
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived their killed parent"


CASES.append("SIGKILL of the parent of a process pool (its workers end within seconds)")


def test_a_store_being_created_is_a_store_to_another_process(tmp_path: Path, monkeypatch) -> None:
    root, seen, replace = tmp_path / "new", [], os.replace

    def slow_replace(src: str | Path, dst: str | Path) -> None:  # another process opens the store meanwhile
        seen.append(Store(root).exists())
        replace(src, dst)

    monkeypatch.setattr(store_module.os, "replace", slow_replace)
    Store(root)._init()
    assert seen == [False] and Store(root).exists()


CASES.append("two processes creating one store at once")


def test_no_c_library_functions_no_proc_no_sysconf(monkeypatch, tmp_path: Path) -> None:
    """Windows: ``ctypes.CDLL(None)`` raises TypeError; no /proc; no ``os.sysconf``; no prctl."""

    def no_cdll(*args: object, **kwargs: object) -> None:
        raise TypeError("LoadLibrary() argument 1 must be str, not None")

    monkeypatch.setattr(ctypes, "CDLL", no_cdll)
    memory._libc.cache_clear()
    try:
        with memory.heap_reused():
            pass
        assert memory.release_free_memory() is False
    finally:
        memory._libc.cache_clear()
    parent._kill_with_parent()
    monkeypatch.setattr(engine, "Path", lambda _: tmp_path / "no-proc")
    monkeypatch.delattr(os, "sysconf")
    assert engine.default_memory_limit() == engine.MAX_DEFAULT_MEMORY


def test_import_and_ingest_without_the_c_librarys_functions(tmp_path: Path) -> None:
    probe = (
        "import ctypes\nreal = ctypes.CDLL\n"
        "def cdll(name, *a, **k):\n    if name is None:\n"
        "        raise TypeError('LoadLibrary() argument 1 must be str, not None')\n"
        "    return real(name, *a, **k)\n"
        "ctypes.CDLL = cdll\nimport traceq\n"
        f"print(traceq.ingest([{str(SAMPLES / 'hta_triton_example.json.gz')!r}], store={str(tmp_path / 's')!r})"
        "['status'][0])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ingested", done.stderr


CASES.append("no C library functions, /proc or sysconf (Windows)")
