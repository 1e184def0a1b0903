"""The C visit of the replay gives the Python loop's times bit for bit, under every kind of scenario."""

from __future__ import annotations

from dataclasses import replace

import polars as pl
import pytest

from traceq.analysis.replay import SCENARIOS, Scenario, engine, overhead_scenario, replay

pytestmark = pytest.mark.skipif(engine._replay_walk is None, reason="the C visit was not built on this install")


def _same(graph, sc: Scenario | None) -> None:
    ref = replay(graph, sc, native=False)
    got = replay(graph, sc, native=True)
    assert list(got.start) == list(ref.start)
    assert list(got.end) == list(ref.end)
    assert got.node_t.to_list() == ref.node_t.to_list()
    assert got.windows.equals(ref.windows)


@pytest.mark.parametrize(
    "name",
    ["enc_fp16_3steps", "sync128_fp32_3steps", "input8_fp16_3steps", "cudnn_var_fp16_3steps", "alloc128_fp32_3steps"],
)
def test_the_c_visit_gives_the_python_loops_times(replayers, name):
    """Traced, without the profiler (slices shortened, launch latencies shifted), and each cause's what-if
    (waits turned off, GPU work dropped) over real planted traces."""
    g = replayers[name].graph
    base = overhead_scenario(g)
    _same(g, None)
    _same(g, base)
    for make in SCENARIOS.values():
        _same(g, make(g, base))


def test_a_thread_of_the_conformer_that_waits_for_another(replayers):
    """The Conformer sample has thread waits (the backward thread): their offsets are read across threads."""
    g = replayers["kineto_conformer_fp16_b4_2steps"].graph
    assert (g.barriers["type"] == "thread").any()
    _same(g, overhead_scenario(g))
    _same(g, Scenario(barrier_on=[k % 3 != 0 for k in range(g.barriers.height)]))


def test_out_of_range_indices_are_refused_not_read(replayers):
    """A corrupt graph (a wait's target beyond the GPU events) raises instead of reading past the buffers."""
    g = replayers["enc_fp16_3steps"].graph
    gpu_wait = pl.col("type") != "thread"
    assert g.barriers.select(gpu_wait.any()).item()
    broken = g.barriers.with_columns(target=pl.when(gpu_wait).then(pl.col("target") + 10**9).otherwise("target"))
    with pytest.raises(ValueError, match="out of range"):
        replay(replace(g, barriers=broken), None, native=True)
