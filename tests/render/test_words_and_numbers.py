"""Words and numbers: one value printed alike wherever it appears, counts that agree with their nouns and
carry thousands separators, gap lengths in order of length, Markdown findings as lists, and summary text
read as totals over the whole profile."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import traceq
from tests.conftest import SAMPLES, run_cli, shared
from traceq.analysis.compare import _change
from traceq.render.reports import finding_lines

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
FRAGMENT1 = "paddle/summaries_from_issues/Paddle_issue_48321_amp_slower_fragment1.txt"
FRAGMENT2 = "paddle/summaries_from_issues/Paddle_issue_48321_amp_slower_fragment2.txt"
FULL = "paddle/issue48321_fp32_operator_summary.txt"


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("words") / "store"
    traceq.ingest([FP32, FP16], store=store, jobs=1)
    return store


def test_a_change_prints_one_value_in_its_title_and_its_size() -> None:
    """3.8749 ms rounds to 3.87, but its kept value 3.875 to 3.88: both places print the kept one."""
    lines = finding_lines(1, _change("cast_overhead", 0.0, 3.8749, {}, {}, "kineto", 20.0), signed=True)
    by = re.search(r"grew by ([\d.]+) ms per step", lines[0]).group(1)
    size = re.search(r"\+([\d.]+) ms/step$", lines[0]).group(1)
    assert by == size == f"{round(3.8749, 3):.2f}"


def test_every_finding_of_a_comparison_prints_its_size_alike(samples: Path) -> None:
    done = run_cli("report", "--compare", "--store", str(samples))
    assert done.returncode == 0, done.stderr
    titles = [line for line in done.stdout.splitlines() if re.match(r"\d+\. .* by [\d,.]+ ms per step", line)]
    assert titles
    for line in titles:
        by = re.search(r" by ([\d,.]+) ms per step", line).group(1)
        assert re.search(rf"[+-]{re.escape(by)} ms/step$", line), line


def test_counts_agree_with_their_nouns_and_carry_separators(tmp_path: Path) -> None:
    """The fragment holds one table with one op row (matmul_v2_grad, 2552 calls) and one kernel row, as its
    text shows (read here line by line)."""
    text = shared(FRAGMENT1).read_text()
    titles = re.findall(r"^-+([A-Z][A-Za-z ]+Summary)-+$", text, re.M)
    calls = re.search(r"^matmul_v2_grad grad_node\s+(\d+)\s", text, re.M).group(1)
    assert titles == ["Operator Summary"] and int(calls) >= 1000
    store = tmp_path / "store"
    done = run_cli("ingest", str(shared(FRAGMENT1)), str(shared(FRAGMENT2)), "--store", str(store))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert "1 table (Operator Summary); 1 op row, 1 kernel row;" in first, first
    assert not re.search(r"\b1 (tables|op rows|kernel rows|incomplete table rows)\b", done.stdout + done.stderr)
    done = run_cli("report", "--compare", "--store", str(store))
    assert f"{int(calls):,}" in done.stdout and not re.search(rf"\b{calls}\b", done.stdout)
    assert "op(s)" not in done.stdout


def test_few_ops_in_common_name_no_bound_side(tmp_path: Path) -> None:
    """The issue's full table against a fragment of two ops: the two are a sliver of the full table's CPU
    time (summed here from its op rows), too little to call NEW CPU-bound."""
    ops = re.findall(r"^(\w+)(?: \w+)?\s+(\d+)\s+([\d.]+) /", shared(FULL).read_text(), re.M)
    total = sum(float(ms) for _, _, ms in ops)
    common = sum(float(ms) for name, _, ms in ops if name in ("unsqueeze2", "shape"))
    assert 0 < common / total < 0.5
    comparison = traceq.compare(str(shared(FULL)), str(shared(FRAGMENT2)), store=tmp_path / "store")
    assert "CPU-bound" not in comparison.verdict and "too little" in comparison.verdict
    assert f"{common / total:.0%}" in comparison.verdict


def _lower_bound_ns(bucket: str) -> float:
    """A gap-length bucket's lower bound from its label (``<10us``, ``10-100us``, ``100us-1ms``, ``>=10ms``)."""
    unit = {"us": 1e3, "ms": 1e6}
    if bucket.startswith("<"):
        return 0.0
    m = re.match(r"(?:>=)?(\d+)(us|ms)?", bucket)
    tail = re.search(r"(us|ms)", bucket[m.end(1) :]).group(1)
    return float(m.group(1)) * unit[m.group(2) or tail]


def test_gap_lengths_are_listed_shortest_first(samples: Path) -> None:
    report = traceq.run_report(FP16.name.split(".")[0], store=samples)
    hist = report.gap_histogram
    for kind in hist["kind"].unique():
        buckets = hist.filter(kind=kind)["bucket"].to_list()
        assert [_lower_bound_ns(b) for b in buckets] == sorted(_lower_bound_ns(b) for b in buckets), buckets
    assert len(hist["bucket"].unique()) >= 3


def test_markdown_findings_are_lists_not_one_paragraph(samples: Path) -> None:
    done = run_cli("report", "--compare", "--store", str(samples), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    tokens = MarkdownIt().parse(done.stdout)
    section = [t for t in tokens if t.type == "inline"]
    findings = [i for i, t in enumerate(section) if re.match(r".* ms/step$", t.content)]
    assert findings
    nexts = [t.content for t in section if t.content.startswith("next: ")]
    assert len(nexts) == len(findings)  # each finding's next step is an item of its own
    assert not any("\n" in t.content and "next:" in t.content for t in section)


def test_summary_text_casts_are_totals_not_per_step(tmp_path: Path) -> None:
    done = run_cli("report", str(shared(FULL)), "--store", str(tmp_path / "store"))
    assert done.returncode == 0, done.stderr
    assert "casts (whole profile):" in done.stdout and "casts / step" not in done.stdout


def test_a_long_step_is_written_with_thousands_separators() -> None:
    """A whole-capture window of 13.3 s: the verdict writes its milliseconds as ``13,334.9``."""
    from types import SimpleNamespace

    from traceq.analysis.compare import verdict

    base, new = SimpleNamespace(window_ms=13334.9), SimpleNamespace(window_ms=12001.25)
    text = verdict(new.window_ms - base.window_ms, base, new, [], None)
    assert "(13,334.9 -> 12,001.2 ms)" in text and "1,333.6 ms per step faster" in text, text
