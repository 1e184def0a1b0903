"""One Conformer b4 pair captured under Nsight Systems in two styles on one H100 and timed without it on
that host (``sample_traces/planted/leaseM``): each step inside an NVTX ``train_step N`` range, with
PyTorch's NVTX op ranges and their shapes (``ops``) or with the CUDA calls alone (``steps``).

The measured steps and the pair's ratio are computed here from the rounds in ``clean_rounds.jsonl``; the
op ranges, kernels and shapes from the events with SQL."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import statistics
from pathlib import Path

import pytest

import traceq
from tests.analysis.replay.conftest import PLANTED
from tests.conftest import built_once, run_cli
from traceq.analysis.replay import Replayer
from traceq.analysis.replay.estimates import NOT_ESTIMATED
from traceq.analysis.replay.overhead import NSYS_ALPHA, NSYS_PLAIN_ALPHA
from traceq.analysis.replay.verdict import compare_replayers
from traceq.querying.engine import Session
from traceq.store import Store

LEASE = PLANTED / "leaseM"
MODES = ("fp32", "fp16")


def _name(style: str, mode: str) -> str:
    return f"nsys_{style}_conformer_{mode}_b4_3steps"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    def ingest(d: Path) -> None:
        files = [LEASE / f"{_name(style, m)}.sqlite.gz" for style in ("ops", "steps") for m in MODES]
        traceq.ingest([str(f) for f in files], store=d / "store", jobs=1)

    return Store(built_once(tmp_path_factory, "leaseM", ingest) / "store")


@pytest.fixture(scope="module")
def rounds() -> dict[str, dict[int, float]]:
    """mode -> round -> step ms, from the lease's log (the warm-up process left out)."""
    out: dict[str, dict[int, float]] = {m: {} for m in MODES}
    for line in (LEASE / "clean_rounds.jsonl").read_text().splitlines():
        r = json.loads(line)
        if not r.get("warmup"):
            out[r["run"].split("_")[1]][r["round"]] = r["step_ms"]
    return out


def _replayer(store: Store, name: str) -> Replayer:
    run_id = store.resolve(name)
    with Session(store, [run_id], use_stored=False) as s:
        return Replayer.load(s, run_id)


def test_six_rounds_of_each_mode_alternating(rounds) -> None:
    assert all(sorted(r) == [1, 2, 3, 4, 5, 6] for r in rounds.values())


def test_the_styles_differ_as_captured(store: Store) -> None:
    """The op-range captures carry shapes on most op ranges; the step-range captures have no op ranges."""
    for mode in MODES:
        for style, shaped in (("ops", True), ("steps", False)):
            run_id = store.resolve(_name(style, mode))
            with Session(store, [run_id]) as s:
                ops, with_shapes, kernels = s.sql(
                    "SELECT count(*) FILTER (WHERE kind = 'op'), count(input_shapes), "
                    "count(*) FILTER (WHERE kind = 'kernel') FROM events"
                ).row(0)
            assert kernels > 2000
            assert (ops > kernels and with_shapes > ops / 2) if shaped else ops == with_shapes == 0, (style, mode)


def test_op_range_captures_are_estimated_within_their_bands(store: Store, rounds) -> None:
    """With the alpha of shaped op ranges; before the training loop's wait for the backward was seen inside
    its ``train_step`` range, both estimates were above 66 ms and outside their bands."""
    for mode in MODES:
        rp = _replayer(store, _name("ops", mode))
        est, clean = rp.unprofiled(), statistics.median(rounds[mode].values())
        assert rp.timeline.shaped and rp.model.alpha == NSYS_ALPHA
        assert est.low_ms <= clean <= est.high_ms, (mode, est.step_ms, clean)
        assert est.step_ms < 0.5 * est.traced_ms
        assert any("NVTX op ranges with input shapes" in n for n in est.notes)


def test_the_pair_band_holds_the_measured_ratio_and_says_it_cannot_tell(store: Store, rounds) -> None:
    """FP16 is 30 % slower measured (the median of the rounds' ratios); the estimate says slightly faster,
    and its band, both captures' whole bands, holds the measured ratio and includes no change."""
    ratio = statistics.median(rounds["fp16"][k] / rounds["fp32"][k] for k in rounds["fp32"])
    assert ratio > 1.2
    v = compare_replayers(_replayer(store, _name("ops", "fp32")), _replayer(store, _name("ops", "fp16")))
    assert v.change_low <= (ratio - 1) * 100 <= v.change_high
    assert v.uncertain


def _export_kernels(name: str, work: Path) -> int:
    """The kernel rows of the lease's export ``name``, counted in the export itself."""
    db = work / f"{name}.sqlite"
    with gzip.open(LEASE / f"{name}.sqlite.gz") as f, db.open("wb") as g:
        shutil.copyfileobj(f, g)
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    finally:
        con.close()


def test_captures_without_op_ranges_are_not_estimated_and_the_report_says_why_first(
    store: Store, tmp_path: Path
) -> None:
    report = traceq.run_report(_name("steps", "fp16"), store=store)
    assert report.unprofiled is None and report.notes[0].startswith(NOT_ESTIMATED)
    assert f"0 op ranges, {_export_kernels(_name('steps', 'fp16'), tmp_path):,} kernels" in report.notes[0]
    comparison = traceq.compare(_name("steps", "fp32"), _name("steps", "fp16"), store=store)
    assert comparison.unprofiled is None and comparison.notes[0].startswith(NOT_ESTIMATED)
    printed = run_cli("report", _name("steps", "fp16"), "--store", str(store.root))
    assert printed.returncode == 0, printed.stderr
    text = " ".join(printed.stdout.split())  # as one line: the terminal wraps it
    assert text.index(NOT_ESTIMATED) < text.index("step time (mean)")
    assert "estimated" not in text.split(NOT_ESTIMATED)[0]  # no estimate printed before it
    asked = traceq.run_report(_name("steps", "fp16"), store=store, what_if=True)
    assert asked.what_if.is_empty() and asked.notes[0].endswith("so none is made either.")
    assert "what-if" not in report.notes[0]


def test_the_model_would_take_out_far_too_much_there(store: Store, rounds) -> None:
    """Why they are not estimated: at the op-range captures' alphas the replay removes most of the host's
    own work between two CUDA calls."""
    for mode in MODES:
        rp = _replayer(store, _name("steps", mode))
        clean = statistics.median(rounds[mode].values())
        assert not rp.timeline.shaped and rp.model.alpha == NSYS_PLAIN_ALPHA
        at_shaped = rp.unprofiled_replay(rp.model.__class__(alpha=NSYS_ALPHA)).step_ms
        assert at_shaped < 0.75 * clean, (mode, at_shaped, clean)


PLAIN = PLANTED / "leaseN"


def test_op_ranges_without_shapes_take_their_own_alpha_and_the_bands_hold(tmp_path: Path) -> None:
    """leaseN: the planted encoder pair captured with PyTorch's op ranges without shapes, timed on that host
    (rounds read from its log here); both estimates and the pair's ratio inside their bands."""
    clean: dict[str, list[float]] = {"fp32": [], "fp16": []}
    for line in (PLAIN / "clean_rounds.jsonl").read_text().splitlines():
        r = json.loads(line)
        if not r.get("warmup"):
            clean[r["run"].split("_")[1]].append(r["step_ms"])
    names = {m: f"nsys_plain_enc_{m}_3steps" for m in MODES}
    traceq.ingest([str(PLAIN / f"{n}.sqlite.gz") for n in names.values()], store=tmp_path / "s", jobs=1)
    store = Store(tmp_path / "s")
    rps = {m: _replayer(store, n) for m, n in names.items()}
    for mode, rp in rps.items():
        est = rp.unprofiled()
        assert not rp.timeline.shaped and rp.model.alpha == NSYS_PLAIN_ALPHA
        assert est.low_ms <= statistics.median(clean[mode]) <= est.high_ms, mode
    ratio = statistics.median(n / b for b, n in zip(clean["fp32"], clean["fp16"], strict=True))
    v = compare_replayers(rps["fp32"], rps["fp16"])
    assert v.change_pct > 0 and v.change_low <= (ratio - 1) * 100 <= v.change_high
