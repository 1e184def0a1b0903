"""One ``render(result, fmt)`` for every result: each kind in each of its formats, a format a kind has no
writer for refused in one line, and the typed findings written with the keys the JSON has always had."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import pytest

import traceq
from tests.conftest import SAMPLES
from traceq.analysis.findings import Finding
from traceq.analysis.results import Comparison, RunReport
from traceq.errors import TraceqError
from traceq.render import Format, json_form, render
from traceq.render.html import write_html
from traceq.render.op_list import listed

if TYPE_CHECKING:
    from traceq.render import Result

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    store = tmp_path_factory.mktemp("render") / "store"
    comparison = traceq.compare(str(FP32), str(FP16), store)
    return {"frame": traceq.runs(store), "report": comparison.new, "comparison": comparison}


def _written(result: Result, fmt: Format) -> str:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    render(result, fmt, out)
    return out.buffer.getvalue().decode("utf-8", "replace")  # type: ignore[attr-defined]


FORMATS = {
    "frame": [Format.table, Format.csv, Format.json, Format.markdown, Format.parquet],
    "report": [Format.table, Format.json, Format.markdown, Format.html],
    "comparison": [Format.table, Format.json, Format.markdown, Format.html],
}


@pytest.mark.parametrize(("kind", "fmt"), [(k, f) for k, formats in FORMATS.items() for f in formats])
def test_every_result_is_written_in_each_of_its_formats(results: dict[str, Result], kind: str, fmt: Format) -> None:
    result = results[kind]
    text = _written(result, fmt)
    assert text.strip()
    if fmt is Format.json and not isinstance(result, pl.DataFrame):
        assert json.loads(text) == json.loads(json.dumps(_json_form(listed(result)), default=str))  # its top ops
    if fmt is Format.json and isinstance(result, pl.DataFrame):
        assert len(json.loads(text)) == result.height == 2
    if fmt is Format.html:
        assert text.startswith("<!doctype html>") and "<script" not in text
    if fmt is Format.markdown:
        assert "|" in text


REFUSED = [(kind, fmt) for kind, formats in FORMATS.items() for fmt in Format if fmt not in formats]


@pytest.mark.parametrize(("kind", "fmt"), REFUSED)
def test_a_format_without_a_writer_is_refused_in_one_line(results: dict[str, Result], kind: str, fmt: Format) -> None:
    with pytest.raises(TraceqError, match=rf"^[^\n]*supports --format .*, not {fmt.value}$"):
        _written(results[kind], fmt)


def test_findings_are_typed_and_written_with_the_json_keys(results: dict[str, Result]) -> None:
    comparison = results["comparison"]
    assert isinstance(comparison, Comparison) and isinstance(comparison.new, RunReport)
    assert comparison.findings and all(isinstance(f, Finding) for f in comparison.findings)
    written = json.loads(_written(comparison, Format.json))
    for finding, row in zip(comparison.findings, written["findings"], strict=True):
        extra = ["unprofiled_ms"] if finding.unprofiled_ms is not None else []
        assert list(row) == ["id", "title", "impact_ms", "evidence", "next_step", *extra]
        assert (row["id"], row["title"]) == (finding.id, finding.title)
    parts = written["waterfall"]
    assert [p["part"] for p in parts] == [p.part for p in comparison.waterfall.parts]  # every cause, in order
    assert len({p["part"] for p in parts}) == len(parts)
    assert sum(p["ms_per_step"] for p in parts) == pytest.approx(comparison.step_time_delta_ms, abs=1e-6)


def test_an_html_page_is_the_same_on_stdout_and_in_a_file(results: dict[str, Result], tmp_path: Path) -> None:
    write_html(results["comparison"], tmp_path / "page.html")  # type: ignore[arg-type]
    assert _written(results["comparison"], Format.html) == (tmp_path / "page.html").read_text() + "\n"


def test_a_long_table_shows_its_ends_and_says_how_many_rows_it_has() -> None:
    """A terminal table of a long result shows its first and last rows, as DuckDB's shell does (rendering
    9,200 events as one table took half a minute); the other formats write every row."""
    frame = pl.DataFrame({"i": range(1000), "name": [f"op{i:04d}" for i in range(1000)]})
    text = _written(frame, Format.table)
    shown = [int(n) for n in re.findall(r"│\s*(\d[\d,]*)\s*│\s*op\d{4}", text.replace(",", ""))]
    assert shown == [*range(20), *range(980, 1000)]
    assert text.rstrip().endswith("1,000 rows, 40 shown (--format csv, json, markdown or parquet writes all)")
    assert _written(frame, Format.csv).count("\n") == 1001
    assert len(json.loads(_written(frame, Format.json))) == 1000
    short = _written(frame.head(40), Format.table)
    assert "shown" not in short and "op0039" in short


def _json_form(result: RunReport | Comparison) -> dict:
    return json_form.report(result) if isinstance(result, RunReport) else json_form.comparison(result)
