"""What the README says about real traces is what traceq prints for them: the verdicts it quotes, the
per-op figure it names, the measured step times it cites from ``runs.json`` and the SELECTs it says work
on both the store and an SQLite export."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
from pathlib import Path

import pytest

import traceq
from tests.conftest import ROOT, SAMPLES, PairStore, shared
from traceq.export import Target, export
from traceq.querying.engine import sql

README = " ".join((ROOT / "README.md").read_text().split())  # one line: quotes wrap in the file


def _quoted_after(lead: str) -> str:
    """The text the README quotes right after ``lead``."""
    at = README.index(lead) + len(lead)
    return README[at:].split('"', 2)[1]


def _clean_step_ms() -> dict[str, float]:
    runs = json.loads(shared("kineto/runs.json").read_text())["runs"]
    return {r["trace"].removesuffix(".json.gz"): r["step_ms_clean"] for r in runs}


def test_the_measured_step_times_are_runs_jsons_clean_ones() -> None:
    clean = _clean_step_ms()
    for batch in ("b4", "b64"):
        pair = f"({clean[f'conformer_fp16_{batch}']:.1f} vs {clean[f'conformer_fp32_{batch}']:.1f} ms"
        assert pair in README, pair
    cited = re.findall(r"\((\d+\.\d) vs (\d+\.\d) ms", README)
    allowed = {f"{v:.1f}" for v in clean.values()}
    assert cited and all(a in allowed and b in allowed for a, b in cited), cited


def test_the_batch_64_verdict_is_the_one_printed(kineto_b64: PairStore) -> None:
    result = traceq.compare(kineto_b64.base, kineto_b64.new, store=kineto_b64.path)
    assert _quoted_after("On the H200 traces at batch 64: ") == result.verdict.removesuffix(".")
    covered = f"covering {result.explained_ms:.2f} of the traced {result.step_time_delta_ms:+.2f} ms"
    assert covered in README


def test_the_nsys_verdict_and_its_conv1d_figure_are_the_ones_printed(nsys_b4: PairStore) -> None:
    result = traceq.compare(nsys_b4.base, nsys_b4.new, store=nsys_b4.path)
    assert _quoted_after("On the nsys pair: ") == result.verdict.removesuffix(".")
    conv = result.op_deltas.filter(name="aten::conv1d").row(0, named=True)
    assert f"`aten::conv1d`'s CPU time {conv['base_cpu_ms']:.2f} -> {conv['new_cpu_ms']:.2f} ms per step" in README


def test_a_select_of_tables_and_metrics_gives_the_same_rows_in_sql_and_the_sqlite_export(tmp_path: Path) -> None:
    assert "gives the same rows there and in `traceq sql`" in README
    store = tmp_path / "store"
    traceq.ingest(SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz", store=store, jobs=1)
    export(traceq.Store(store), [], Target.sqlite, tmp_path / "runs.db")
    query = (
        "select g.step, g.kind, count(*) n, sum(g.gap_ns) ns, max(s.dur_ns) step_ns from gpu_gaps g join steps s "
        "on s.run_id = g.run_id and s.step = g.step group by g.step, g.kind order by g.step, g.kind"
    )
    with sqlite3.connect(tmp_path / "runs.db") as db:
        exported = db.execute(query).fetchall()
    assert len(exported) >= 4
    assert [tuple(r) for r in sql(query, store).iter_rows()] == exported


@pytest.mark.parametrize("claim", ["44.5 vs 32.5", "126 -> 812", "22.9 ms of GPU time", "--run amp"])
def test_claims_that_no_longer_hold_are_gone(claim: str) -> None:
    assert claim not in README


def test_the_leaseg_verdict_and_its_rounds_are_the_ones_printed(tmp_path: Path) -> None:
    """The worked example where the trace says AMP is slower and the estimate, like the clean rounds, says
    it is faster: its verdict as printed, and the rounds' median ratio as the manifest's rounds give it."""
    folder = ROOT / "sample_traces" / "planted" / "leaseG"
    store = tmp_path / "store"
    for m in ("fp32", "fp16"):
        traceq.ingest([str(folder / f"conformer_{m}_b64_3steps.json.gz")], store=store)
    result = traceq.compare("conformer_fp32_b64_3steps", "conformer_fp16_b64_3steps", store=store)
    lead = "$ traceq report --compare conformer_fp32_b64_3steps conformer_fp16_b64_3steps "
    at = README.index(lead) + len(lead)
    assert README[at:].startswith(result.verdict), result.verdict
    doc = json.loads((folder / "manifest.json").read_text())["traces"]
    base, new = (doc[f"conformer_{m}_b64_3steps.json.gz"] for m in ("fp32", "fp16"))
    of_base = dict(zip(base["round_numbers"], base["step_ms_rounds"], strict=True))
    rounds = zip(new["round_numbers"], new["step_ms_rounds"], strict=True)
    ratios = [ms / of_base[k] for k, ms in rounds if k in of_base]
    assert f"NEW over BASE {statistics.median(ratios):.3f} as the median" in README


def test_the_leasel_nsys_figures_are_the_measured_and_printed_ones(tmp_path: Path) -> None:
    """The Conformer b4 pair captured under nsys and timed without it on one host: the measured steps and the
    median of the rounds' ratios from the manifest's rounds, the estimates and the verdict's band as printed."""
    folder = ROOT / "sample_traces" / "planted" / "leaseL"
    names = {m: f"nsys_conformer_{m}_b4_3steps" for m in ("fp32", "fp16")}
    store = tmp_path / "store"
    traceq.ingest([str(folder / f"{n}.sqlite.gz") for n in names.values()], store=store, jobs=1)
    v = traceq.compare(names["fp32"], names["fp16"], store=store).unprofiled
    doc = json.loads((folder / "manifest.json").read_text())["traces"]
    base, new = (doc[f"{names[m]}.sqlite.gz"] for m in ("fp32", "fp16"))
    ratios = [n / b for b, n in zip(base["step_ms_rounds"], new["step_ms_rounds"], strict=True)]
    claim = (
        f"{statistics.median(base['step_ms_rounds']):.1f} and {statistics.median(new['step_ms_rounds']):.1f} ms "
        f"measured (FP16 {(statistics.median(ratios) - 1) * 100:.1f}% slower, the median of six rounds' ratios), "
        f"{v.base.step_ms:.1f} and {v.new.step_ms:.1f} ms estimated from {v.base.traced_ms:.1f} and "
        f"{v.new.traced_ms:.1f} ms traced ({v.change_pct:+.1f}%, band {v.change_low:+.1f}% to {v.change_high:+.1f}%)"
    )
    assert len(ratios) == 6 and claim in README, claim
