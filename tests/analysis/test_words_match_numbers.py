"""Words agree with the numbers beside them: every sign combination of a comparison's parts, its measured
step times and summary-text totals, checked by parsing the sentences traceq writes back into numbers."""

from __future__ import annotations

import re
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from traceq.analysis.causes import CAUSES
from traceq.analysis.compare import _change, verdict
from traceq.analysis.summary_compare import summary_verdict

PARTS = sorted(c.id for c in CAUSES.values() if c.change)
ms = st.floats(min_value=0.0, max_value=500.0, allow_nan=False).map(lambda x: round(x, 3))
signed = st.floats(min_value=-500.0, max_value=500.0, allow_nan=False).filter(lambda x: abs(x) >= 0.05)


@settings(max_examples=300, deadline=None)
@given(cause=st.sampled_from(PARTS), b=ms, n=ms, flavour=st.sampled_from(["kineto", "nsys", "paddle"]), rest=ms)
def test_a_change_title_says_grew_or_fell_with_its_size(
    cause: str, b: float, n: float, flavour: str, rest: float
) -> None:
    if abs(n - b) < 0.005:
        return
    step = n + rest
    f = _change(cause, b, n, {}, {}, flavour, step)
    assert f.impact_ms == n - b  # in full: the formats round it
    word = "grew" if n > b else "fell"
    # the change as stated (rounded once, to a thousandth), so that the title and the finding's size agree
    assert f" {word} by {abs(round(n - b, 3)):.2f} ms per step ({b:.2f} -> {n:.2f} ms)" in f.title
    assert ("grew" in f.title) != ("fell" in f.title)
    if n < b and step and n >= 0.2 * step and cause != "gpu_compute":  # shrank, yet a large share: its fix stays
        assert f"still takes {n:.2f} of NEW's {step:.2f} ms traced step ({n / step:.0%})" in f.next_step
        assert "no action needed" not in f.next_step.lower()
    elif n < b:  # a part that shrank is no problem to fix
        assert (
            "no action needed" in f.next_step.lower()
            or "cost less" in f.next_step.lower()
            or cause
            in (
                "gpu_compute",
                "memory_copies",
                "layout_transforms",
                "optimizer",
                "communication",
            )
        )


def _finding(cause: str, impact: float) -> SimpleNamespace:
    return SimpleNamespace(id=cause, impact_ms=impact)


@settings(max_examples=400, deadline=None)
@given(
    base_ms=st.floats(min_value=1.0, max_value=900.0),
    delta=signed,
    impacts=st.lists(st.tuples(st.sampled_from(PARTS), signed), max_size=6, unique_by=lambda t: t[0]),
    measured=st.none()
    | st.tuples(st.floats(min_value=1.0, max_value=900.0), st.floats(min_value=1.0, max_value=900.0)),
)
def test_the_verdict_agrees_in_sign_and_size(
    base_ms: float, delta: float, impacts: list[tuple[str, float]], measured: tuple[float, float] | None
) -> None:
    new_ms = base_ms + delta
    if new_ms <= 0:
        return
    findings = sorted((_finding(c, i) for c, i in impacts), key=lambda f: -abs(f.impact_ms))
    m = (
        None
        if measured is None
        else {"base_ms": measured[0], "new_ms": measured[1], "delta_ms": measured[1] - measured[0]}
    )
    text = verdict(delta, SimpleNamespace(window_ms=base_ms), SimpleNamespace(window_ms=new_ms), findings, m)
    number = r"([\d,.]+)"  # thousands separated
    traced = re.search(rf"(?:^|Traced: )NEW is {number} ms per step (slower|faster) \({number} -> {number} ms\)", text)
    assert traced is not None, text
    assert float(traced[1].replace(",", "")) == round(abs(delta), 1)
    assert traced[2] == ("slower" if delta > 0 else "faster")
    # every named part carries its own sign; those before "outweigh" move the step the way it moved
    for label, value in re.findall(r"([a-zA-Z/() ]+?) ([+-][\d.]+) ms", text[traced.end() :]):
        cause = next(c for c in CAUSES.values() if label.strip().endswith(c.label))
        impact = next(f.impact_ms for f in findings if f.id == cause.id)
        assert float(value) == round(impact, 1)
    if " outweigh" in text:
        before, after = text[traced.end() :].split(" outweigh", 1)
        assert all((float(v) > 0) == (delta > 0) for v in re.findall(r" ([+-][\d.]+) ms", before))
        assert all((float(v) > 0) != (delta > 0) for v in re.findall(r" ([+-][\d.]+) ms", after.split(".")[0] + "."))
    if m is not None:
        real = m["delta_ms"]
        said = re.search(r"Measured without the profiler, NEW is ([\d,.]+) ms per step (slower|faster)", text)
        if round(real, 1) == 0:
            assert said is None and "Measured without the profiler, NEW takes the same time" in text
        else:
            assert said is not None and float(said[1].replace(",", "")) == round(abs(real), 1)
            assert said[2] == ("slower" if real > 0 else "faster")
        flips = round(real, 1) != 0 and (real > 0) != (delta > 0)
        assert ("reverses the traced direction" in text) == flips
        made = re.search(r"the profiler made the traced difference ([\d,.]+) ms (larger|smaller)", text)
        if made:
            assert float(made[1].replace(",", "")) == round(abs(delta - real), 1)
            assert made[2] == ("larger" if abs(delta) > abs(real) else "smaller")


@settings(max_examples=300, deadline=None)
@given(cpu=signed, gpu=signed, n=st.integers(min_value=1, max_value=200))
def test_the_summary_verdict_agrees_with_its_totals(cpu: float, gpu: float, n: int) -> None:
    text = summary_verdict(cpu, gpu, n, min_ms=1.0)
    assert f"CPU time is {cpu:+,.0f} ms" in text and f"GPU time {gpu:+,.0f} ms" in text
    if max(abs(cpu), abs(gpu)) < 1.0:
        assert "within noise" in text
    elif "CPU-bound" in text:
        assert cpu > 0 and cpu > abs(gpu)
    elif "kernels take longer" in text:
        assert gpu > 0 and gpu >= abs(cpu)
    elif "both sides shrank" in text:
        assert cpu <= 0 and gpu <= 0
    else:
        saved, added = re.search(r"the (CPU|GPU) time saved outweighs the (CPU|GPU) time added", text).groups()
        assert (cpu if saved == "CPU" else gpu) < 0 < (cpu if added == "CPU" else gpu)
