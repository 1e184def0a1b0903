"""The committed planted traces (three steps each, with step times measured without the profiler) and the
Conformer samples, ingested once into a temporary store; replayers loaded once per run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, SHARED, built_once
from traceq.analysis.replay import Replayer
from traceq.querying.engine import Session
from traceq.store import Store

PLANTED = SAMPLES / "planted"
#: The Conformer b4 samples (cut from the shared traces) and the shared traces they were cut from.
CONFORMER_SAMPLES = {"kineto_conformer_fp32_b4_2steps": "conformer_fp32_b4.json.gz",
                     "kineto_conformer_fp16_b4_2steps": "conformer_fp16_b4.json.gz"}  # fmt: skip


def conformer_ms() -> dict[str, dict]:
    """The Conformer samples' clean step times: ``step_ms_clean`` of the shared traces' runs.json (each round
    timed in a process that had not profiled), with its rounds."""
    runs = {r["trace"]: r for r in json.loads((SHARED / "kineto" / "runs.json").read_text())["runs"]}
    return {name: {"step_ms": runs[trace]["step_ms_clean"], "step_ms_rounds": runs[trace]["step_ms_clean_rounds"]}
            for name, trace in CONFORMER_SAMPLES.items()}  # fmt: skip


CONFORMER_MS = conformer_ms()


@pytest.fixture(scope="session")
def manifest() -> dict[str, dict]:
    """Run name (file name less ``.json.gz``) -> settings and measured step times."""
    doc = json.loads((PLANTED / "manifest.json").read_text())
    out = {name[: -len(".json.gz")]: v for name, v in doc["traces"].items()}
    out.update(doc.get("measured_only", {}))  # fixes measured but not committed as traces
    out.update(CONFORMER_MS)
    return out


@pytest.fixture(scope="session")
def replay_store(tmp_path_factory: pytest.TempPathFactory, manifest: dict[str, dict]) -> Store:
    files = [str(PLANTED / f"{name}.json.gz") for name in manifest if (PLANTED / f"{name}.json.gz").exists()]
    files += [str(SAMPLES / f"{name}.json.gz") for name in CONFORMER_MS]
    root = built_once(tmp_path_factory, "replay", lambda d: traceq.ingest(files, store=d / "store", jobs=1))
    return Store(root / "store")


@pytest.fixture(scope="session")
def replayers(replay_store: Store) -> dict[str, Replayer]:
    """A loaded replayer per run name (filled on first use)."""
    return _Lazy(replay_store)


class _Lazy(dict):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def __missing__(self, name: str) -> Replayer:
        run_id = self.store.resolve(name)
        with Session(self.store, [run_id], use_stored=False) as s:
            self[name] = Replayer.load(s, run_id)
        return self[name]


def trace_path(name: str) -> Path:
    return PLANTED / f"{name}.json.gz" if (PLANTED / f"{name}.json.gz").exists() else SAMPLES / f"{name}.json.gz"
