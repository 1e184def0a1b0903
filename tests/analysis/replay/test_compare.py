"""The verdict of a comparison without the profiler, and when it flips the traced one."""

from __future__ import annotations

import json

import pytest

from traceq.analysis.replay import compare_replayers
from traceq.render import rounding


def test_conformer_b4_flip(replayers, manifest):
    """The Conformer at batch 4: traced, AMP looks faster; measured cleanly it is about 20% slower, though
    its rounds overlap (a launch-bound pair). The fp32 trace's host ran the same trivial ops clearly slower,
    and is scaled to the fp16 trace's speed; the estimate's band holds the measured change."""
    base, new = "kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"
    v = compare_replayers(replayers[base], replayers[new])
    measured = (manifest[new]["step_ms"] / manifest[base]["step_ms"] - 1) * 100
    assert v.traced_change_pct < 0 < measured
    assert v.change_pct > 0 and v.flips
    assert v.change_low <= measured <= v.change_high
    assert v.change_pct == pytest.approx(measured, abs=10)
    assert v.scaled == "base" and v.host_ratio < 1 / 1.2
    json.dumps(rounding.verdict(v))


def test_without_host_scaling_the_conformer_verdict_stays_wrong(replayers):
    v = compare_replayers(
        replayers["kineto_conformer_fp32_b4_2steps"], replayers["kineto_conformer_fp16_b4_2steps"], normalize_host=False
    )
    assert v.scaled is None and v.change_pct < 0


@pytest.mark.parametrize(
    ("base", "new"),
    [("enc_fp32_3steps", "enc_fp16_3steps"), ("control_fp32_3steps", "control_fp16_3steps")],
)
def test_verdict_close_to_the_measured_change(replayers, manifest, base, new):
    v = compare_replayers(replayers[base], replayers[new])
    measured = (manifest[new]["step_ms"] / manifest[base]["step_ms"] - 1) * 100
    assert v.change_pct == pytest.approx(measured, abs=5)
    assert not v.flips
