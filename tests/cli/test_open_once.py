"""Open once, pass down: one command opens one store, one query session and reads the run catalog once
(the replay reuses the comparison's session and the building blocks it made)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, Ingested, run_cli
from traceq import store as store_module
from traceq.querying.engine import Session
from traceq.store import Store

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
BASE, NEW = "kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts of stores made, sessions opened and run catalog rows read while a test runs."""
    calls: Counter[str] = Counter()

    def counting(name: str, real):  # type: ignore[no-untyped-def]
        def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(Store, "__init__", counting("store", Store.__init__))
    monkeypatch.setattr(Session, "__init__", counting("session", Session.__init__))
    monkeypatch.setattr(store_module, "_read_row", counting("catalog_row", store_module._read_row))
    yield calls


@pytest.fixture(scope="module")
def pair(ingested: Ingested) -> Path:
    return ingested.store(FP32, FP16)


@pytest.mark.parametrize(
    "args",
    [
        ("report", "--compare", BASE, NEW, "--what-if"),
        ("report", "--compare", BASE, NEW, "--what-if", "--unprofiled"),
        ("report", "--compare"),
        ("report", NEW, "--what-if"),
        ("report",),
    ],
    ids=" ".join,
)
def test_a_report_opens_one_store_and_one_session_and_reads_the_catalog_once(
    pair: Path, counted: Counter[str], args: tuple[str, ...]
) -> None:
    done = run_cli(*args, "--store", str(pair))
    assert done.returncode == 0, done.stderr
    assert counted["store"] == 1
    assert counted["session"] == 1
    assert counted["catalog_row"] == 2  # each of the store's two runs' catalog row, once


def test_an_export_reads_the_catalog_once(pair: Path, counted: Counter[str], tmp_path: Path) -> None:
    done = run_cli("export", "--compare", BASE, NEW, "--to", "perfetto", str(tmp_path / "t.json"), "--store", str(pair))
    assert done.returncode == 0, done.stderr
    assert counted["store"] == 1
    assert counted["session"] == 1
    assert counted["catalog_row"] == 2
