"""The unchanged replay reproduces the trace: against ``_windows``, against the raw JSON, on every run."""

from __future__ import annotations

import itertools

import pytest

from tests.analysis.replay.conftest import CONFORMER_MS, trace_path
from tests.conftest import raw_trace

RUNS = [
    "enc_fp32_3steps", "enc_fp16_3steps", "control_fp32_3steps", "control_fp16_3steps", "resnet18_b4_fp32_3steps",
    "input8_fp16_3steps", "sync128_fp32_3steps", "cudnn_var_fp16_3steps", *CONFORMER_MS,
]  # fmt: skip


@pytest.mark.parametrize("name", RUNS)
def test_windows_reproduced_per_step(replayers, name):
    out = replayers[name].reproduce()
    assert out.height == replayers[name].timeline.n_steps
    assert out["traced_ms"].null_count() == 0 and out["replayed_ms"].null_count() == 0
    assert out["diff_pct"].abs().max() < 1e-6


@pytest.mark.parametrize("name", ["enc_fp32_3steps", "sync128_fp32_3steps", "cudnn_var_fp16_3steps"])
def test_gpu_work_replayed_at_its_recorded_times(replayers, name):
    """Every kernel, copy and set starts and ends in the unchanged replay where the raw JSON has it."""
    r = replayers[name]
    rep = r.traced()
    t0 = r.timeline.t0_ns
    replayed = {
        (ev_start, ev_end)
        for ev_start, ev_end in zip((round(s + t0) for s in rep.start), (round(e + t0) for e in rep.end), strict=True)
    }
    raw = [
        e
        for e in raw_trace(trace_path(name))["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    assert len(raw) == len(rep.start)
    # Kineto's microseconds carry three decimals: the ns are exact
    recorded = {(round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)) for e in raw}
    assert replayed == recorded


def _independent_windows(name: str) -> list[float]:
    """Each step's window in plain Python from the raw JSON: a step is complete when its host range and the
    GPU work launched in it are done, and each window runs from the previous step's completion."""
    events = raw_trace(trace_path(name))["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    )
    launches = {
        e["args"]["correlation"]: e["ts"]
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    device_end = [None] * len(steps)
    for e in events:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        t = launches.get(e["args"].get("correlation"))
        for i, (lo, hi) in enumerate(steps):
            if t is not None and lo <= t < hi:
                end = e["ts"] + e["dur"]
                device_end[i] = end if device_end[i] is None else max(device_end[i], end)
    complete, done = [], float("-inf")
    for (_, hi), dev in zip(steps, device_end, strict=True):
        done = max(done, hi, dev if dev is not None else hi)
        complete.append(done)
    return [(b - a) / 1000 for a, b in itertools.pairwise(complete)]


@pytest.mark.parametrize("name", ["enc_fp16_3steps", "control_fp32_3steps", "input8_fp16_3steps"])
def test_windows_after_the_first_match_an_independent_computation(replayers, name):
    replayed = replayers[name].traced().windows["ms"].to_list()[1:]
    assert replayed == pytest.approx(_independent_windows(name), rel=1e-6)
