"""The replay in reports: ``what_if_ms`` on the findings it models, the step time without the profiler,
the comparison's verdict on estimated step times (measured ones win), and the command's flags."""

from __future__ import annotations

import json

import pytest

import traceq
from tests.conftest import SAMPLES, raw_trace, run_cli, shared
from traceq.analysis.compare import compare
from traceq.analysis.replay.explain import with_replay
from traceq.analysis.replay.whatif import FIXES
from traceq.analysis.report import run_report
from traceq.render import json_form, rounding

CONFORMER = ("kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps")


@pytest.fixture(scope="module")
def input_report(replay_store):
    """The run whose input pipeline was planted (single-process DataLoader), with its what-ifs."""
    return with_replay(run_report("input8_fp16_3steps", replay_store), replay_store, what_if=True, unprofiled=True)


def test_findings_of_modelled_causes_carry_the_what_if_saving(input_report):
    saving = dict(zip(input_report.what_if["cause"], input_report.what_if["saving_ms"], strict=True))
    assert set(saving) == set(FIXES)
    assert {f.id for f in input_report.findings} & set(FIXES), "no finding of a modelled cause"
    for f in input_report.findings:
        d = json_form.finding(f)
        if f.id in FIXES:
            assert f.what_if_ms == saving[f.id]
            assert d["what_if_ms"] == round(f.what_if_ms, 3)
        else:
            assert f.what_if_ms is None and "what_if_ms" not in d


def test_the_input_pipeline_saving_is_the_measured_one(input_report, manifest):
    """Measured without the profiler: the same run with DataLoader workers (its fixed twin) is 23.2 ms faster."""
    measured = manifest["input8_fp16_3steps"]["step_ms"] - manifest["workers8_fp16_3steps"]["step_ms"]
    (finding,) = [f for f in input_report.findings if f.id == "input_pipeline"]
    assert finding.what_if_ms == pytest.approx(measured, rel=0.25)


def test_the_estimate_is_in_the_report_and_its_json(input_report, manifest):
    est = input_report.unprofiled
    assert est is not None and est.low_ms <= est.step_ms <= est.high_ms
    assert est.low_ms <= manifest["input8_fp16_3steps"]["step_ms"] <= est.high_ms
    doc = json.loads(json.dumps(json_form.report(input_report), default=str))
    assert doc["unprofiled"]["unprofiled_ms"] == pytest.approx(est.step_ms, abs=1e-3)
    assert [r["cause"] for r in doc["what_if"]] == list(FIXES)


def test_traced_only_leaves_the_report_unchanged_and_the_default_adds_the_estimate(replay_store):
    plain = run_report("enc_fp16_3steps", replay_store)
    same = with_replay(plain, replay_store, unprofiled=False)
    assert same is plain and same.what_if.is_empty() and same.unprofiled is None
    assert all("what_if_ms" not in json_form.finding(f) for f in plain.findings)
    default = with_replay(plain, replay_store)
    assert default.unprofiled is not None and default.what_if.is_empty()
    assert default.unprofiled.step_ms < default.unprofiled.traced_ms


def test_the_verdict_without_the_profiler_flips_the_traced_one(replay_store, manifest):
    """Conformer b4: the traced steps say AMP is faster; measured cleanly it is about 20 % slower (its rounds
    overlap). The estimate leads the verdict, says NEW is slower, and gives a band that holds the measured
    change; where that band includes no change the verdict says the difference is within its noise."""
    base, new = CONFORMER
    result = with_replay(compare(base, new, replay_store), replay_store, unprofiled=True)
    measured = manifest[new]["step_ms"] / manifest[base]["step_ms"] * 100 - 100
    assert measured > 0 > result.step_time_delta_ms
    assert result.unprofiled is not None
    est = rounding.verdict(result.unprofiled)  # as the formats state it
    assert est["flips"] and est["change_pct"] > 0
    assert est["change_low"] <= measured <= est["change_high"]
    assert result.verdict.startswith(f"Estimated without the profiler (replay), NEW is {est['change_pct']:.1f}% slower")
    if est["uncertain"]:
        assert "the band includes no change: the difference is within the estimate's noise" in result.verdict
    else:
        assert "flips the traced conclusion" in result.verdict
    assert json_form.comparison(result)["unprofiled"]["new"]["run_id"] == result.new.run["run_id"]


def test_the_waterfall_closes_on_the_estimated_difference(replay_store):
    """Where the verdict leads with the estimate, the waterfall of the traced steps goes on to it: the
    estimate takes out of each traced step what it removed, and ends on the estimated steps, whose
    difference is the verdict's (each the mean of the replayed steps)."""
    from traceq.render.reports import waterfall_table

    base, new = CONFORMER
    result = with_replay(compare(base, new, replay_store), replay_store, unprofiled=True)
    assert result.unprofiled is not None
    est = rounding.verdict(result.unprofiled)
    rows = {r["part"]: r for r in waterfall_table(result).to_dicts()}
    traced = rows["= step time (mean), NEW - BASE"]
    taken = next(r for name, r in rows.items() if name.endswith("taken out (estimated)"))
    last = rows["= step time without the profiler (estimated)"]
    assert list(rows)[-1] == "= step time without the profiler (estimated)"
    for side, column in (("base", "BASE ms"), ("new", "NEW ms")):
        steps = est[side]["per_step"]
        assert last[column] == pytest.approx(sum(s["unprofiled_ms"] for s in steps) / len(steps), abs=1e-3)
        assert traced[column] + taken[column] == pytest.approx(last[column], abs=2e-3)
    assert last["NEW - BASE"] == pytest.approx(last["NEW ms"] - last["BASE ms"], abs=2e-3)
    assert last["NEW - BASE"] / last["BASE ms"] * 100 == pytest.approx(est["change_pct"], abs=0.05)
    assert traced["NEW - BASE"] + taken["NEW - BASE"] == pytest.approx(last["NEW - BASE"], abs=2e-3)
    assert (last["NEW - BASE"] > 0) == (est["change_pct"] > 0) != (traced["NEW - BASE"] > 0)  # the flip
    from traceq.render.replay import unprofiled_lines

    for side in ("base", "new"):  # a run whose host time was scaled is not said to lose the profiler's cost alone
        scaled = est["scaled"] == side
        assert est[side]["host_scale"] != 1.0 if scaled else est[side]["host_scale"] == 1.0
        assert ("host-speed scaling" in unprofiled_lines(est[side])[0]) == scaled
    plain = waterfall_table(compare(base, new, replay_store))
    assert plain["part"][-1] == "= step time (mean), NEW - BASE"  # traced only: the traced steps alone


def test_each_waterfall_column_adds_up_to_its_step(replay_store):
    """Both printed waterfalls of Conformer b4: BASE's, NEW's and the difference's column each sum, over
    the parts shown and "other", to the step row below them (the parts below the threshold were once
    summed for the difference alone, leaving BASE and NEW short by them)."""
    from traceq.analysis.findings import OTHER
    from traceq.render.reports import estimated_waterfall_table, waterfall_table

    base, new = CONFORMER
    result = with_replay(compare(base, new, replay_store), replay_store, unprofiled=True)
    for table, step in ((estimated_waterfall_table(result), "= step time without the profiler (estimated), NEW - BASE"),
                        (waterfall_table(result), "= step time (mean), NEW - BASE")):  # fmt: skip
        parts = table["part"].to_list()
        end = parts.index(step)
        assert OTHER in parts[:end]  # this pair has parts below the threshold
        for column in ("BASE ms", "NEW ms", "NEW - BASE"):
            values = table[column].to_list()
            assert None not in values[:end]
            assert sum(values[:end]) == pytest.approx(values[end], abs=5e-3), (step, column)


def test_the_estimated_difference_is_split_by_cause(replay_store):
    """Conformer b4 without the profiler: each traced gap's causes scaled as the replay changed the gap. The
    parts close on the estimated difference; busy parts are the traced ones; the profiler only adds host
    time, so no idle part grows (BASE's host time is also scaled down to NEW's speed); and the parts
    account for the replay's own step, leaving a small rest. AMP's casts and launches outweigh its faster
    kernels, as measured (AMP slower)."""
    from traceq.analysis.results import REST

    base, new = CONFORMER
    result = with_replay(compare(base, new, replay_store), replay_store, unprofiled=True)
    water, verdict = result.unprofiled_waterfall, result.unprofiled
    assert water is not None and verdict is not None
    est = rounding.verdict(verdict)
    parts = {p.part: p for p in water.parts}
    for side, split, total in (("base", result.base.split, est["base"]["unprofiled_ms"]),
                               ("new", result.new.split, est["new"]["unprofiled_ms"])):  # fmt: skip
        assert split is not None
        ms = {c: getattr(p, f"{side}_ms") for c, p in parts.items()}
        assert sum(ms.values()) == pytest.approx(total, abs=2e-3)
        assert abs(ms[REST]) < 0.02 * total
        for cause, traced in split.idle.items():
            assert ms[cause] - split.busy.get(cause, 0.0) <= traced + 1e-9, (side, cause)
        assert ms["gpu_compute"] == pytest.approx(split.part("gpu_compute"))
    assert water.delta_ms == pytest.approx(est["new"]["unprofiled_ms"] - est["base"]["unprofiled_ms"], abs=2e-3)
    grew = {c for c, p in parts.items() if p.delta_ms > 0.5}
    assert {"cast_overhead", "launch_overhead"} <= grew and parts["gpu_compute"].delta_ms < 0
    assert json_form.comparison(result)["unprofiled"]["waterfall"] == json_form.waterfall(water)
    assert result.findings
    assert all(f.unprofiled_ms == pytest.approx(parts[f.id].delta_ms, abs=1e-3) for f in result.findings)


def test_next_steps_follow_the_estimate_where_it_leads(replay_store):
    """A part that fell in the trace but grew without the profiler, or that still holds a large share of NEW's
    estimated step, keeps its fix: "no action needed" only where the estimate says the part shrank and is
    small. On Conformer b4 the traced launch and Python parts fell (the profiler's cost fell with them) while
    both grew without the profiler."""
    from traceq.analysis.causes import CAUSES
    from traceq.analysis.compare import STILL_LARGE_SHARE

    base, new = CONFORMER
    traced = {f.id: f for f in compare(base, new, replay_store).findings}
    result = with_replay(compare(base, new, replay_store), replay_store, unprofiled=True)
    assert result.unprofiled_waterfall is not None and result.unprofiled is not None
    new_parts = {p.part: p.new_ms for p in result.unprofiled_waterfall.parts}
    step = result.unprofiled.new.step_ms
    flavour = result.new.run["flavour"]
    flipped = 0
    for f in result.findings:
        assert f.unprofiled_ms is not None
        fix = CAUSES[f.id].next_step(flavour)
        if f.unprofiled_ms > 0:
            assert f.next_step == fix, f.id
        if f.next_step.startswith("No action needed"):
            assert f.unprofiled_ms <= 0 and new_parts[f.id] < STILL_LARGE_SHARE * step, f.id
        if traced[f.id].impact_ms < 0 < f.unprofiled_ms and f.id != "gpu_compute":
            flipped += 1
            assert traced[f.id].next_step != fix
    assert flipped >= 2  # launch_overhead and python_overhead


def test_a_runs_estimate_is_split_by_cause(replay_store):
    """A run's report splits its step without the profiler like its traced one: busy parts as traced, each
    idle cause no longer than traced (the profiler only adds host time), the parts adding up to the
    estimate with a small rest; the terminal report shows it first and the JSON holds it."""
    from traceq.analysis.results import REST

    plain = run_report("enc_fp16_3steps", replay_store)
    report = with_replay(plain, replay_store)
    estimate, split, traced = report.unprofiled, report.unprofiled_split, plain.split
    assert estimate is not None and split is not None and traced is not None
    est = rounding.estimate(estimate)
    assert split.busy == traced.busy and split.window_ms == pytest.approx(est["unprofiled_ms"], abs=1e-3)
    assert sum(split.busy.values()) + sum(split.idle.values()) == pytest.approx(split.window_ms)
    assert abs(split.idle[REST]) < 0.02 * split.window_ms
    assert all(split.idle[c] <= ms + 1e-9 for c, ms in traced.idle.items())
    assert sum(split.idle.values()) < sum(traced.idle.values())
    assert json_form.report(report)["unprofiled"]["split"]["idle"] == split.idle
    assert report.findings
    assert all(f.unprofiled_ms == pytest.approx(split.part(f.id), abs=1e-3) for f in report.findings)
    assert with_replay(plain, replay_store, unprofiled=False).unprofiled_split is None


def test_the_estimate_is_not_split_for_runs_of_several_ranks(tmp_path):
    store = tmp_path / "store"
    traceq.ingest(str(SAMPLES / "ddp" / "fp16"), store=store, name="ddp_fp16")
    (run_id,) = traceq.runs(store)["run_id"].to_list()
    result = with_replay(compare(run_id, run_id, store), store, unprofiled=True)
    assert result.unprofiled is not None and result.unprofiled_waterfall is None
    assert "waterfall" not in json_form.comparison(result)["unprofiled"]


def test_measured_step_times_win_over_the_estimate(replay_store, manifest):
    base, new = CONFORMER
    b, n = manifest[base]["step_ms"], manifest[new]["step_ms"]
    result = with_replay(compare(base, new, replay_store, b, n), replay_store, unprofiled=True)
    assert result.verdict.startswith("Measured without the profiler, NEW is")
    assert "it agrees with the measured step times, which the verdict uses" in result.verdict
    assert result.measured is not None and result.measured["delta_ms"] == pytest.approx(n - b)


def test_comparison_findings_carry_news_what_if(replay_store):
    result = with_replay(compare("input8_fp16_3steps", "workers8_fp16_3steps", replay_store), replay_store,
                         what_if=True)  # fmt: skip
    saving = dict(zip(result.new.what_if["cause"], result.new.what_if["saving_ms"], strict=True))
    assert not result.base.what_if.is_empty()
    modelled = [f for f in result.findings if f.id in FIXES]
    assert modelled, [f.id for f in result.findings]
    for f in modelled:
        assert f.what_if_ms == pytest.approx(saving[f.id], abs=1e-3)


def test_summary_text_says_it_has_no_timeline(tmp_path):
    store = tmp_path / "store"
    traceq.ingest([shared("paddle/issue48321_fp32_operator_summary.txt")], store=store, jobs=1)
    report = with_replay(run_report("issue48321_fp32_operator_summary", store), store, what_if=True)
    assert "Summary text has no timeline to replay." in report.notes


def test_the_command_prints_the_what_ifs_and_the_estimate(replay_store):
    store = str(replay_store.root)
    out = run_cli("report", "input8_fp16_3steps", "--what-if", "--unprofiled", "--format", "json", "--store", store)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert any("what_if_ms" in f for f in doc["findings"]) and doc["what_if"] and doc["unprofiled"]
    text = run_cli("report", "input8_fp16_3steps", "--what-if", "--unprofiled", "--store", store).stdout
    assert "Step time without the profiler (replay)" in text and "What each fix would save" in text
    for f in doc["findings"]:
        if f.get("what_if_ms", 0) > 0.005:
            assert f"the step would be {f['what_if_ms']:.2f} ms/step shorter" in text


def test_the_comparison_page_shows_the_estimate(replay_store):
    base, new = CONFORMER
    out = run_cli("report", "--compare", base, new, "--unprofiled", "--what-if", "--format", "html",
                  "--store", str(replay_store.root))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Without the profiler (replay)" in out.stdout and "Estimated without the profiler (replay)" in out.stdout
    assert "What each fix would save" in out.stdout


def test_the_flags_need_no_compare_but_measured_times_still_do(replay_store):
    store = str(replay_store.root)
    out = run_cli("report", "enc_fp16_3steps", "--unprofiled", "--base-step-ms", "10", "--store", store)
    assert out.returncode == 1 and "needs --compare" in out.stderr


def test_a_one_file_run_replays_the_rank_its_trace_declares(tmp_path):
    """A DDP rank's trace ingested alone keeps its rank (1): the replay takes the run's own rank."""
    path = SAMPLES / "ddp" / "fp16" / "ddp_fp16_rank1.json.gz"
    declared = raw_trace(path)["distributedInfo"]["rank"]
    traceq.ingest([path], store=tmp_path / "store", jobs=1)
    report = with_replay(run_report("ddp_fp16_rank1", tmp_path / "store"), tmp_path / "store", unprofiled=True)
    assert declared == 1 and report.unprofiled is not None
    assert report.unprofiled.per_step.height and report.unprofiled.traced_ms > report.unprofiled.step_ms > 0
