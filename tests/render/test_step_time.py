"""One step-time definition per page: the mean step (the mean analysis window, the windows tiling the run
from its first step's start to where the last step is done on the host and the GPU), stated as the same
number in the headline, the timeline's caption, the waterfall and a comparison's verdict. The means are
computed from the raw traces."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from tests.conftest import SAMPLES, run_cli

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
STEP = re.compile(r"^ProfilerStep#\d+")


def _mean_step_ms(path: Path) -> float:
    """(the later of the last step's end and the end of the GPU work launched in the steps - the first step's
    start) / steps: the mean of windows that tile the run."""
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "user_annotation"
                   and STEP.match(e["name"]))  # fmt: skip
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    ends = [
        g["ts"] + g["dur"]
        for g in events
        if g.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and (launch := launches.get(g["args"].get("correlation"))) is not None
        and any(lo <= launch["ts"] < hi for lo, hi in steps)
    ]
    return (max(steps[-1][1], *ends) - steps[0][0]) / 1e3 / len(steps)


def _text(html: str, heading: str) -> str:
    """The section of the page from ``heading`` to the end of its first drawing, without tags."""
    section = html[html.index(heading) :]
    return re.sub(r"<[^>]+>", " ", section[: section.index("</svg>")])


def test_a_run_s_page_states_one_step_time(tmp_path: Path) -> None:
    mean = f"{_mean_step_ms(FP16):.2f} ms"
    store = str(tmp_path / "s")
    page = run_cli("report", str(FP16), "--store", store, "--format", "html").stdout
    assert f"<tr><td>step time (mean)</td><td>{mean}</td></tr>" in page
    assert f"the one nearest the mean step time ({mean})" in _text(page, "Timeline of")
    waterfall = _text(page, "Where the step goes")
    assert re.search(r"\bstep\s+" + re.escape(mean), waterfall)
    assert not re.search(r"median (step|of \d)|step time \(median", page)
    md = run_cli("report", "kineto_conformer_fp16_b4_2steps", "--store", store, "--format", "markdown").stdout
    assert f"step time (mean): {mean}" in md


def test_a_comparison_page_states_each_run_s_step_time_once(tmp_path: Path) -> None:
    base, new = _mean_step_ms(FP32), _mean_step_ms(FP16)
    page = run_cli("report", "--compare", str(FP32), str(FP16), "--store", str(tmp_path / "s"), "--format", "html")
    html = page.stdout
    assert f"({base:.1f} -&gt; {new:.1f} ms)" in html.split("<p class='verdict'>")[1].split("</p>")[0]
    timeline = _text(html, "Timeline of")
    assert f"nearest the mean step time ({base:.2f} ms)" in timeline
    assert f"nearest the mean step time ({new:.2f} ms)" in timeline
    assert f"BASE {base:.2f} ms" in html and f"NEW {new:.2f} ms" in html
    assert not re.search(r"median (step|of \d)|step time \(median", html)
