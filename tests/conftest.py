"""Shared fixtures: paths to the real traces, an independent raw-JSON loader, temporary stores."""

from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@functools.lru_cache(maxsize=4)
def raw_trace(path: Path) -> dict:
    """The file parsed by the standard library alone: the independent reference for counts."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def run_cli(
    *args: str, env: dict | None = None, cwd: Path | None = None, text: bool = True
) -> subprocess.CompletedProcess:
    """Run the real ``traceq`` entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args],
        capture_output=True,
        text=text,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=600,
    )


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime, to prove nothing changed."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"
