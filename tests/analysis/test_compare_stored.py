"""A comparison of a run with metrics stored at ingest and one without computes only what the second
lacks (each run in a session of its own), and says exactly what the comparison of two runs without
stored metrics says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES
from traceq.analysis import compare as comparing
from traceq.analysis.report import run_report
from traceq.analysis.results import RunReport
from traceq.ingestion import metrics
from traceq.querying.engine import stored_metrics
from traceq.querying.stored import CACHED
from traceq.render import json_form
from traceq.store import Store

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


def _ingest(path: Path, store: Path, stored: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """Ingest ``path`` (in this process), its metrics stored or not."""
    with monkeypatch.context() as m:
        m.setattr(metrics, "STORE_MIN_EVENTS", 0 if stored else 10**12)
        m.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)
        return traceq.ingest([path], store=store, jobs=1)["run_id"][0]


def _sessions_opened(monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """The runs of each session the comparison opens."""
    opened: list[list[str] | None] = []
    real = comparing.Session.__init__

    def recording(self: comparing.Session, *args: object, **kwargs: object) -> None:
        opened.append(kwargs.get("runs", args[1] if len(args) > 1 else None))  # type: ignore[arg-type]
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(comparing.Session, "__init__", recording)
    return opened


def test_mixed_comparison_computes_only_the_missing_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mixed, plain = tmp_path / "mixed", tmp_path / "plain"
    base = _ingest(FP32, mixed, True, monkeypatch)
    new = _ingest(FP16, mixed, False, monkeypatch)
    runs_dir = Store(mixed).runs_dir
    assert stored_metrics(runs_dir, base) == frozenset(CACHED) and not stored_metrics(runs_dir, new)
    assert (_ingest(FP32, plain, False, monkeypatch), _ingest(FP16, plain, False, monkeypatch)) == (base, new)
    opened = _sessions_opened(monkeypatch)
    compared = comparing.compare(base, new, mixed)
    assert opened == [[base], [new]]  # BASE reads its stored results; NEW's metrics alone are computed
    comparing.compare(base, new, plain)
    assert opened[2:] == [[base, new]]  # neither run has them: one pass over both
    # each side of the comparison is that run's own report (BASE's from its stored results)
    for side, run_id in ((compared.base, base), (compared.new, new)):
        alone = run_report(run_id, mixed)
        assert _same(json.loads(_json(side)), json.loads(_json(alone))), run_id


def _json(report: RunReport) -> str:
    return json.dumps(json_form.report(report), default=str, sort_keys=True)


def _same(a: object, b: object) -> bool:
    """Equal, numbers within 0.5 % (the step split's memory-copy part, scaled onto the busy union, was seen
    to differ by 0.2 % between two reports of one stored run on Python 3.10)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == pytest.approx(b, rel=5e-3, abs=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b
