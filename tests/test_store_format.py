"""The store's format: written in its marker by ingest, and a store of another format refused in one line
(its runs would be read with another meaning; re-ingesting its traces makes a store of this one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, run_cli, tree_state
from traceq.errors import StoreError
from traceq.locations import MARKER
from traceq.store import FORMAT_VERSION, Store

SMALL = SAMPLES / "hta_triton_example.json.gz"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    traceq.ingest([SMALL], store=root, jobs=1)
    return root


def test_a_store_is_written_in_the_current_format(store: Path) -> None:
    assert json.loads((store / MARKER).read_text()) == {"format": FORMAT_VERSION}
    assert len(traceq.runs(store)) == 1


@pytest.mark.parametrize(
    ("written", "words"),
    [
        ({"format": FORMAT_VERSION - 1}, ("older traceq", f"store format {FORMAT_VERSION - 1}", "ingest its traces")),
        ({}, ("older traceq", "store format unknown", "ingest its traces")),
        ({"format": FORMAT_VERSION + 1}, ("newer traceq", "upgrade traceq")),
    ],
)
def test_a_store_of_another_format_is_refused_in_one_line(store: Path, written: dict, words: tuple[str, ...]) -> None:
    (store / MARKER).write_text(json.dumps(written) + "\n")
    before = tree_state(store)
    for args in (["runs"], ["report", "--traced-only"], ["ingest", "-q", str(SMALL)]):
        done = run_cli(*args, "--store", str(store))
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"traceq: error: {store}: ") and all(w in lines[0] for w in words), lines[0]
    with pytest.raises(StoreError, match="traceq"):
        Store(store)
    assert tree_state(store) == before  # never upgraded in place: only ingest writes a store, and it refused
