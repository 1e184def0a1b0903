"""The HTML page's colours: the idle causes far apart from each other and from the kernel classes (a CIE76
colour difference computed here from sRGB), and the host lanes coloured by op, named in the legend."""

from __future__ import annotations

import itertools
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, run_cli
from tests.render.test_html import _chromium, _png_pixels, _rgb
from traceq.render.html import CAUSE_COLOURS, CLASS_COLOURS, HOST_REST

PAIR = ("kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Near on purpose: cast idle time and cast kernels, unexplained idle time and other kernels.
ALIKE = {("cast_overhead", "cast"), ("unexplained", "other")}


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour."""

    def linear(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (linear(v / 255) for v in _rgb(colour))
    x, y, z = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _difference(a: str, b: str) -> float:
    return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5


def test_idle_causes_are_far_apart_in_colour() -> None:
    for (c1, v1), (c2, v2) in itertools.combinations(CAUSE_COLOURS.items(), 2):
        assert _difference(v1, v2) >= 25, (c1, c2)
    for (cause, v1), (cls, v2) in itertools.product(CAUSE_COLOURS.items(), CLASS_COLOURS.items()):
        if (cause, cls) not in ALIKE:
            assert _difference(v1, v2) >= 25, (cause, cls)
    for a, b in (("launch_overhead", "cast_overhead"), ("launch_overhead", "python_overhead"),
                 ("cast_overhead", "python_overhead")):  # fmt: skip
        assert _difference(CAUSE_COLOURS[a], CAUSE_COLOURS[b]) >= 35, (a, b)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("colours")
    traceq.ingest([SAMPLES / f"{name}.json.gz" for name in PAIR], store=tmp / "store", jobs=1)
    out = tmp / "compare.html"
    done = run_cli("report", "--compare", *PAIR, "--html", str(out), "--store", str(tmp / "store"))
    assert done.returncode == 0, done.stderr
    return out


def _timeline(source: str) -> str:
    """The page's timeline strip (its first SVG after the heading)."""
    return source[source.index("<h2>Timeline") :].split("</svg>", 1)[0]


def _host_rects(svg: str) -> list[tuple[str, str, float]]:
    """(op name, fill, ms) of every bar on a host lane, read from the page in drawing order (the ms from
    the bar's title)."""
    out, on_host = [], False
    for m in re.finditer(r'<text [^>]*class="lane"[^>]*>([^<]*)</text>|<rect ([^>]*)><title>([^<]*)</title>', svg):
        if m.group(1) is not None:
            on_host = m.group(1).startswith("host thread") or (on_host and not m.group(1).startswith("GPU"))
            continue
        if on_host:
            attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            name, ms = re.fullmatch(r"(.*) \(([\d.]+) ms\)", m.group(3)).groups()
            out.append((name, attrs["fill"], float(ms)))
    return out


def test_host_lanes_are_coloured_by_op_and_named_in_the_legend(page: Path) -> None:
    source = page.read_text()
    bars = _host_rects(_timeline(source))
    assert len(bars) > 50
    fills: dict[str, set[str]] = defaultdict(set)
    width: dict[str, float] = defaultdict(float)
    for name, fill, w in bars:
        fills[name].add(fill)
        width[name] += w
    assert all(len(f) == 1 for f in fills.values())  # one op, one colour (in BASE and in NEW)
    own = {name: next(iter(f)) for name, f in fills.items() if f != {HOST_REST}}
    assert len(set(own.values())) == len(own) >= 5  # each coloured op a colour of its own
    longest = sorted(width, key=lambda n: -width[n])[: len(own)]
    assert set(own) == set(longest)  # the ops with the most host time get the colours
    legend = source[source.index("host ops:") :].split("</p>", 1)[0]
    for name, fill in own.items():
        assert f"<i style='background:{fill}'></i>{name.replace('&', '&amp;').replace('<', '&lt;')}" in legend
    assert "other ops" in legend


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")
def test_the_host_colours_are_drawn(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    done = _chromium(page, tmp_path, "--window-size=1200,1600", f"--screenshot={shot}")
    assert done.returncode == 0 and shot.exists(), done.stderr
    pixels = _png_pixels(shot)
    own = {fill for _, fill, _ in _host_rects(_timeline(page.read_text())) if fill != HOST_REST}
    assert sum(pixels[_rgb(fill)] > 20 for fill in own) >= 5
    for cause in ("launch_overhead", "cast_overhead", "python_overhead"):
        assert pixels[_rgb(CAUSE_COLOURS[cause])] > 20, cause
