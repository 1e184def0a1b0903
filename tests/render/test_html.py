"""The HTML page shows time: the timeline of each run's median step (checked against the raw trace and the
gpu_busy metric), and the page drawn offline in headless Chromium (skipped where Chromium is absent).

With ``TRACEQ_WRITE_DOCS=1`` the Chromium test also writes its screenshot of the sample comparison to
``docs/compare_html.png``, the picture in the README.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.conftest import ROOT, SAMPLES, run_cli, shared
from traceq.analysis.step_lanes import timeline
from traceq.querying.engine import Session
from traceq.render.html import CAUSE_COLOURS, CLASS_COLOURS, render_html

PAIR = ("kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps")
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("html") / "store"
    traceq.ingest([SAMPLES / f"{name}.json.gz" for name in PAIR], store=store, jobs=1)
    return store


def _raw(name: str) -> list[dict]:
    with gzip.open(SAMPLES / f"{name}.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def _union_ms(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def _top_level(ops: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Ops (start, end, name) of one thread that no other op encloses."""
    out, reach = [], -1
    for s, e, name in sorted(ops, key=lambda o: (o[0], -o[1])):
        if s >= reach:
            out.append((s, e, name))
            reach = e
        else:
            reach = max(reach, e)
    return out


@pytest.mark.parametrize("name", PAIR)
def test_the_timeline_is_the_step_nearest_the_mean_and_matches_the_raw_trace(name: str, pair_store: Path) -> None:
    store = traceq.Store(pair_store)
    rid = store.resolve(name)
    with Session(store, [rid], own_queries=True) as session:
        tl = timeline(session, rid)
        windows = session.query("_windows").filter(pl.col("run_id") == rid)
        busy = session.query("gpu_busy").filter((pl.col("run_id") == rid) & (pl.col("step") == tl.step))
    assert tl is not None and tl.windows == windows.height == 2
    lengths = [(e - s, s, k) for s, e, k in windows.select("win_start", "win_end", "step").iter_rows()]
    mean = sum(n for n, _, _ in lengths) / len(lengths)
    length, start, step = min(lengths, key=lambda w: (abs(w[0] - mean), w[1]))  # of two equally near: the earlier
    assert (tl.step, tl.window_ms) == (step, length / 1e6)
    end = start + length
    raw = _raw(name)
    # every GPU event of the raw file that overlaps the window is on a GPU lane, clipped to it
    gpu = [e for e in raw if e.get("cat") in GPU_CATEGORIES]
    inside = [e for e in gpu if round(e["ts"] * 1000) < end and round((e["ts"] + e["dur"]) * 1000) > start]
    assert Counter(tl.gpu["name"]) == Counter(e["name"] for e in inside) and len(inside) > 500
    # the lanes add up to the step: busy (the union of the work) + idle (the pieces by cause) = window
    intervals = list(zip(tl.gpu["start_ms"], tl.gpu["end_ms"], strict=True))
    assert _union_ms(intervals) == pytest.approx(busy["busy_ns"].item() / 1e6, abs=1e-5)
    idle = (tl.idle["end_ms"] - tl.idle["start_ms"]).sum()
    assert idle == pytest.approx(busy["idle_ns"].item() / 1e6, abs=1e-5)
    assert set(tl.idle["cause"]) <= set(CAUSE_COLOURS) and "launch_overhead" in set(tl.idle["cause"])
    assert set(tl.gpu["kernel_class"]) <= set(CLASS_COLOURS)
    # host lanes: each launching thread's top-level ops in the window, as the raw file nests them
    threads = set(tl.host.select("pid", "tid").iter_rows())
    assert len(threads) == 2  # Kineto: the forward thread and the autograd thread
    for pid, tid in threads:
        ops = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000), e["name"]) for e in raw
               if e.get("cat") == "cpu_op" and e.get("pid") == pid and e.get("tid") == tid]  # fmt: skip
        expected = [o for o in _top_level(ops) if o[0] < end and o[1] > start]
        drawn = tl.host.filter((pl.col("pid") == pid) & (pl.col("tid") == tid))
        assert drawn["name"].to_list() == [o[2] for o in expected]


def _png_pixels(path: Path) -> Counter[tuple[int, int, int]]:
    """Colour counts of an 8-bit RGB or RGBA PNG (what Chromium writes), decoded with zlib alone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    previous, counts = bytearray(stride), Counter()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        counts.update(zip(line[0::bpp], line[1::bpp], line[2::bpp], strict=True))
        previous = line
    return counts


def _rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def _chromium(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on ``page`` with networking disabled (every request goes to a closed local port)."""
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp / 'profile'}",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", *args, page.as_uri()],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")
def test_the_pages_draw_offline_in_headless_chromium(pair_store: Path, tmp_path: Path) -> None:
    page = tmp_path / "compare.html"
    done = run_cli("report", "--compare", *PAIR, "--html", str(page), "--store", str(pair_store))
    assert done.returncode == 0, done.stderr
    source = page.read_text()
    assert "<script" not in source and not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", source)
    for heading in ("Timeline of a representative step", "Waterfall", "Findings", "GPU time each op caused"):
        assert heading in source
    dom = _chromium(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr
    assert dom.stdout.count("<rect") == source.count("<rect") > 2000  # every bar parsed and kept
    shot = tmp_path / "compare.png"
    done = _chromium(page, tmp_path, "--window-size=1200,2400", f"--screenshot={shot}")
    assert done.returncode == 0 and shot.stat().st_size > 50_000, done.stderr
    pixels = _png_pixels(shot)
    comparison = traceq.compare(*PAIR, store=pair_store)
    drawn = {c for c in (*CAUSE_COLOURS, *CLASS_COLOURS) if pixels[_rgb({**CAUSE_COLOURS, **CLASS_COLOURS}[c])] > 20}
    causes = set(comparison.base.timeline.idle["cause"]) | set(comparison.new.timeline.idle["cause"])
    classes = set(comparison.base.timeline.gpu["kernel_class"]) | set(comparison.new.timeline.gpu["kernel_class"])
    assert {"launch_overhead", "cast_overhead", "python_overhead"} <= drawn & causes
    assert {"gemm", "cast", "elementwise"} <= drawn & classes
    if os.environ.get("TRACEQ_WRITE_DOCS"):
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(shot, ROOT / "docs" / "compare_html.png")
    # one run's page: its timeline, its step built up from its parts, its findings
    single = tmp_path / "run.html"
    done = run_cli("report", PAIR[1], "--html", str(single), "--store", str(pair_store))
    assert done.returncode == 0, done.stderr
    text = single.read_text()
    assert "Timeline of a representative step" in text and "Where the step goes" in text
    assert text.count("host thread") == 2 and "BASE" not in text
    dom = _chromium(single, tmp_path, "--dump-dom")
    assert dom.stdout.count("<rect") == text.count("<rect") > 1000


#: Other formats: a Paddle CPU trace (no GPU work), a Paddle GPU-layout trace, an nsys export, summary text.
OTHER_FORMATS = {
    "paddle331_cpu_fp32_noshapes": SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz",
    "paddlefmt_conformer_fp16_b64_2steps": SAMPLES / "paddlefmt_conformer_fp16_b64_2steps.json.gz",
    "nvfuser_report1__nsys2024.6.2": "nsys/nvfuser_report1__nsys2024.6.2.sqlite.gz",
    "paddle_fp32.summary_default": "paddle/cpu_paddle_3.3.1/paddle_fp32.summary_default.txt",
}


@pytest.fixture(scope="module")
def formats_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("html_formats") / "store"
    traceq.ingest([p if isinstance(p, Path) else shared(p) for p in OTHER_FORMATS.values()], store=store, jobs=1)
    return store


@pytest.mark.parametrize("name", list(OTHER_FORMATS))
def test_each_formats_page_draws_what_its_run_has(name: str, formats_store: Path) -> None:
    report = traceq.run_report(name, formats_store)
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "<script" not in page
    timed = report.timeline is not None
    assert ("Timeline of a representative step" in page) == timed == (not name.endswith("summary_default"))
    if timed:  # one rect per GPU event, idle interval and host op of the step
        t = report.timeline
        lanes = page.split('aria-label="timeline"')[1].split("</svg>")[0]
        assert lanes.count("<rect") == t.gpu.height + t.idle.height + t.host.height > 0
    rid = report.run["run_id"]
    query = (  # GPU work that an op launched (an nsys capture without PyTorch's op ranges has none)
        "select count(*) from events g join events o on o.run_id = g.run_id and o.rank = g.rank "
        f"and o.event_id = g.op_id where g.run_id = '{rid}' and g.kind in ('kernel', 'memcpy', 'memset') "
        "and o.kind in ('op', 'op_inner')"
    )
    gpu = traceq.sql(query, formats_store).item()
    # the chart of the GPU time ops caused is drawn only where ops caused some (never a chart of zeros)
    assert ("GPU time each op caused" in page) == (gpu > 0 and timed)
    if name.startswith("nvfuser"):  # GPU work, but no op: its NVTX ranges are nvFuser's own, no PyTorch op's
        assert gpu == 0 and report.summary.kernels_per_step


def test_a_summary_text_comparison_page_has_no_timeline(formats_store: Path) -> None:
    """Dynamic- against static-graph Paddle summaries: most ops are in one of them only, drawn as absent."""
    static = shared("paddle/cpu_paddle_3.3.1/paddle_static_fp32.summary_default.txt")
    comparison = traceq.compare("paddle_fp32.summary_default", str(static), formats_store)
    page = render_html(comparison)
    assert "Timeline" not in page and "Waterfall" not in page and "<script" not in page
    absent = comparison.op_deltas.filter(pl.col("base_cpu_ms").is_null() | pl.col("new_cpu_ms").is_null())
    shown = comparison.op_deltas.sort(pl.max_horizontal("base_cpu_ms", "new_cpu_ms"), descending=True).head(15)
    drawn = page.split("CPU time of each op")[1].split("</svg>")[0]
    assert drawn.count(" absent</text>") == shown.join(absent, on="name").height > 0
