"""Step times without the profiler against the times measured without it, on the committed real runs."""

from __future__ import annotations

import json

import pytest

from traceq.analysis.replay.overhead import OverheadModel

#: Runs whose measurement is consistent (the mean over 30 back-to-back steps and the median of 30 steps
#: timed one by one agree within 6%): cudnn_var_fp16 (813 against 631 ms) and its nobench twin (22.9
#: against 19.1 ms) are not, and are left out of the accuracy test.
CONSISTENT = [
    "enc_fp32_3steps", "enc_fp16_3steps", "control_fp32_3steps", "control_fp16_3steps", "resnet18_b4_fp32_3steps",
    "resnet18_b4_fp16_3steps", "input8_fp16_3steps", "workers8_fp16_3steps", "sync128_fp32_3steps",
    "base128_fp32_3steps", "base128_fp32_c5_3steps", "alloc128_fp32_c5_3steps",
]  # fmt: skip


def test_the_consistent_runs_are_the_consistently_measured_ones(manifest):
    for name, v in manifest.items():
        each = v.get("step_ms_each_median")
        if each is not None and name.endswith("_3steps"):
            assert (abs(v["step_ms"] - each) / v["step_ms"] < 0.06) == (name in CONSISTENT), name


@pytest.mark.parametrize("name", CONSISTENT)
def test_estimate_within_15_percent_of_the_measured_step(replayers, manifest, name):
    est = replayers[name].unprofiled()
    assert est.step_ms == pytest.approx(manifest[name]["step_ms"], rel=0.15)


@pytest.mark.parametrize("name", CONSISTENT)
def test_band_and_per_step(replayers, name):
    est = replayers[name].unprofiled()
    assert est.low_ms <= est.step_ms <= est.high_ms <= est.traced_ms + 1e-6
    steps = est.per_step
    assert steps.height == replayers[name].timeline.n_steps
    assert (steps["low_ms"] <= steps["unprofiled_ms"] + 1e-9).all()
    assert (steps["unprofiled_ms"] <= steps["high_ms"] + 1e-9).all()
    assert steps["unprofiled_ms"].mean() == pytest.approx(est.step_ms)
    json.dumps(est.to_dict())


def test_the_profiler_costs_a_launch_bound_run_a_third_and_a_gpu_bound_one_nothing(replayers):
    enc = replayers["enc_fp32_3steps"].unprofiled()
    assert 0.25 < enc.profiler_ms / enc.traced_ms < 0.5
    control = replayers["control_fp32_3steps"].unprofiled()
    assert control.profiler_ms == pytest.approx(0.0, abs=0.01 * control.traced_ms)


@pytest.mark.parametrize(
    ("fp32", "fp16"),
    [
        ("enc_fp32_3steps", "enc_fp16_3steps"),
        ("control_fp32_3steps", "control_fp16_3steps"),
        ("resnet18_b4_fp32_3steps", "resnet18_b4_fp16_3steps"),
    ],
)
def test_amp_direction_as_measured(replayers, manifest, fp32, fp16):
    measured = manifest[fp16]["step_ms"] > manifest[fp32]["step_ms"]
    estimated = replayers[fp16].unprofiled().step_ms > replayers[fp32].unprofiled().step_ms
    assert estimated == measured


def test_more_cost_per_transition_means_a_shorter_step(replayers):
    r = replayers["enc_fp16_3steps"]
    steps = [r.run(r.unprofiled_replay(OverheadModel(alpha=a)).scenario).step_ms for a in (0.3, 0.6, 0.9)]
    assert steps[0] > steps[1] > steps[2]


def test_stacks_add_the_python_tracer_note_only_where_recorded(replayers):
    assert not any("Python stacks" in n for n in replayers["enc_fp16_3steps"].unprofiled().notes)
