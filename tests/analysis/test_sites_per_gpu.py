"""Where the idle time went, in the same units as the split beside it: for a rank with several GPUs the
split is their mean per step, so the sites are too (they had summed both GPUs: a 2-GPU capture's sync site
said 89.7 ms per step beside a finding of 44.9 ms)."""

from __future__ import annotations

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES, SHARED, Ingested
from traceq.store import Store

RUNS = {
    "two GPUs, one process": SHARED / "nsys" / "nsysai_mfu_2gpu_after__nsys2026.2.1.sqlite.gz",
    "two GPUs, 1 s": SHARED / "nsys" / "nsysai_h100_2gpu_1s__nsys2026.2.1.sqlite.gz",
    "one GPU": SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz",
}


@pytest.mark.parametrize("label", list(RUNS))
def test_each_causes_sites_add_up_to_its_idle_time_in_the_split(label: str, ingested: Ingested) -> None:
    store = Store(ingested.store(RUNS[label]))
    (run_id,) = traceq.runs(store)["run_id"]
    report = traceq.run_report(run_id, store)
    devices = traceq.sql(f"select count(distinct device) from gpu_busy where run_id = '{run_id}'", store).item()
    assert (devices > 1) == label.startswith("two GPUs")
    by_cause = report.sites.group_by("cause").agg(pl.col("ms_per_step").sum())
    assert by_cause.height > 1
    for cause, ms in by_cause.iter_rows():
        assert ms == pytest.approx(report.split.idle[cause], rel=1e-6, abs=1e-9), cause
    for finding in report.findings:  # a held cause's sites: the finding's idle time, not the GPUs' sum
        if finding.id == "host_sync":
            listed = sum(s["idle_ms_per_step"] for s in finding.evidence["sites"])
            assert listed <= finding.evidence["gpu_idle_ms_per_step"] * (1 + 1e-6)
