"""Exports under test: one store holding a real trace of every format, ingested once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, built_once, shared

#: Run name -> trace: each format (Kineto, Paddle CPU and GPU layout, nsys with two GPUs and
#: with one, Paddle summary text).
TRACES = {
    "kineto_conformer_fp32_b4_2steps": SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz",
    "kineto_conformer_fp16_b4_2steps": SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
    "paddle331_cpu_fp32_noshapes": SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
    "paddlefmt_conformer_fp32_b64_2steps": SAMPLES / "paddlefmt_conformer_fp32_b64_2steps.json.gz",
    "nsysai_h100_2gpu_1s__nsys2026.2.1": "nsys/nsysai_h100_2gpu_1s__nsys2026.2.1.sqlite.gz",
    "nvfuser_report1__nsys2024.6.2": "nsys/nvfuser_report1__nsys2024.6.2.sqlite.gz",
    "paddle_fp32.summary_default": "paddle/cpu_paddle_3.3.1/paddle_fp32.summary_default.txt",
}
#: Runs with a timeline (every trace but the summary text).
TIMELINES = [name for name in TRACES if not name.endswith("summary_default")]


@pytest.fixture(scope="session")
def export_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one run of each of :data:`TRACES`."""
    paths = [p if isinstance(p, Path) else shared(p) for p in TRACES.values()]
    return built_once(tmp_path_factory, "exports", lambda d: traceq.ingest(paths, store=d / "store", jobs=1)) / "store"


def run_id(store: Path, name: str) -> str:
    return traceq.Store(store).resolve(name)
