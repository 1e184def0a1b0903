"""The replay under changed scenarios keeps every constraint it models, and moves steps the way they must."""

from __future__ import annotations

import polars as pl
import pytest

from traceq.analysis.replay import Scenario, overhead_scenario, replay


def _check_constraints(r, sc: Scenario, out) -> None:
    """GPU work starts after its launch plus its latency and after its stream predecessor; lanes keep their
    order without overlap; host nodes keep their order and each slice lasts at least its CPU time; every
    enabled wait ends after what it waited for (plus its recorded latency)."""
    g = r.graph
    eps = 1e-3
    items = g.items
    dropped = sc.dropped or [False] * items.height
    shift = sc.lat_shift or [0.0] * items.height
    node_t = out.node_t.to_list()
    for i, (ln, lat) in enumerate(zip(items["launch_node"], items["lat"], strict=True)):
        if dropped[i]:
            continue
        assert out.end[i] - out.start[i] == pytest.approx(items["d"][i], abs=eps)
        if ln is not None:
            assert out.start[i] >= node_t[ln] + lat + shift[i] - eps
    by_lane = pl.DataFrame({"lane": items["lane"], "s": out.start, "e": out.end, "drop": dropped})
    for _, part in by_lane.filter(~pl.col("drop")).group_by("lane"):
        s, e = part["s"].to_list(), part["e"].to_list()
        assert all(s[k + 1] >= e[k] - eps for k in range(len(s) - 1))
    W = (sc.W if sc.W is not None else g.nodes["W0"]).to_list()
    thread = g.nodes["thread"].to_list()
    for k in range(len(node_t) - 1):
        if thread[k] == thread[k + 1]:
            assert node_t[k + 1] - node_t[k] >= W[k] - eps
    on = sc.barrier_on or [True] * g.barriers.height
    for b, row in enumerate(g.barriers.iter_rows(named=True)):
        if not on[b]:
            continue
        if row["type"] == "gpu_end":
            assert node_t[row["node"]] >= out.end[row["target"]] + row["post"] - eps
        elif row["type"] == "gpu_start":
            assert node_t[row["node"]] >= out.start[row["target"]] + row["post"] - eps
        else:
            assert node_t[row["node"]] >= node_t[row["target"]] + row["post"] - eps


@pytest.mark.parametrize("name", ["enc_fp16_3steps", "sync128_fp32_3steps", "input8_fp16_3steps"])
def test_constraints_hold_without_the_profiler(replayers, name):
    r = replayers[name]
    sc = overhead_scenario(r.graph)
    _check_constraints(r, sc, replay(r.graph, sc))


@pytest.mark.parametrize("name", ["enc_fp32_3steps", "cudnn_var_fp16_3steps"])
def test_constraints_hold_in_what_ifs(replayers, name):
    from traceq.analysis.replay import SCENARIOS

    r = replayers[name]
    base = overhead_scenario(r.graph)
    for make in SCENARIOS.values():
        sc = make(r.graph, base)
        _check_constraints(r, sc, replay(r.graph, sc))


def test_a_gpu_bound_run_keeps_its_step_when_the_host_takes_no_time(replayers):
    """control_fp32: big GEMMs; the host is 5 ms ahead of a 69 ms GPU step: no host change moves it."""
    r = replayers["control_fp32_3steps"]
    traced = r.traced().step_ms
    no_host = replay(r.graph, Scenario(W=r.graph.nodes["W0"] * 0.0)).step_ms
    assert no_host == pytest.approx(traced, rel=0.01)


def test_a_launch_bound_run_follows_its_host(replayers):
    """enc_fp32: the small encoder waits on its host; half the host time makes steps about half as long
    (the GPU is busy a fraction of the step), never longer."""
    r = replayers["enc_fp32_3steps"]
    traced = r.traced()
    half = replay(r.graph, Scenario(W=r.graph.nodes["W0"] * 0.5))
    assert half.step_ms < 0.65 * traced.step_ms
    assert (half.windows["ms"] <= traced.windows["ms"] + 1e-6).all()


def test_turning_syncs_off_lets_the_host_run_ahead(replayers):
    """sync128_fp32: a NaN guard syncs after every layer; without the waits, the host finishes each step's
    calls earlier than when it waited, and the GPU keeps its order."""
    r = replayers["sync128_fp32_3steps"]
    g = r.graph
    on = [reason != "sync" for reason in g.barriers["reason"].to_list()]
    assert not all(on)
    base = r.traced()
    free = replay(g, Scenario(barrier_on=on))
    host_end = free.windows["host_end"] - base.windows["host_end"]
    assert (host_end < 0).all()
    assert free.step_ms <= base.step_ms + 1e-6


def test_dropping_gpu_work_shortens_a_gpu_bound_step_by_its_length(replayers):
    """control_fp32 is GPU-bound: leaving out its GEMMs of one shape shortens each step by about their time."""
    r = replayers["control_fp32_3steps"]
    items = r.graph.items
    gemm = items["kernel_class"] == "gemm"
    launched = items["launch_node"].is_not_null() & items["step"].is_not_null()
    biggest = items.filter(gemm & launched).group_by("name").agg(pl.col("d").sum()).sort("d").tail(1)["name"][0]
    drop = (items["name"] == biggest) & launched
    per_step = items.filter(drop).group_by("step").agg(pl.col("d").sum() / 1e6)["d"].mean()
    out = replay(r.graph, Scenario(dropped=drop.to_list()))
    saved = r.traced().step_ms - out.step_ms
    assert saved == pytest.approx(per_step, rel=0.1)
