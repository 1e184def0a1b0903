"""Paddle summary text: every real summary parses; rows and totals equal the printed text."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SHARED, run_cli, tree_state
from traceq.errors import InputError
from traceq.readers import read_trace
from traceq.readers.paddle_summary import parse_summary

SUMMARIES = sorted(
    p
    for p in (SHARED / "paddle").rglob("*.txt")
    if "summary" in p.name or (p.parent.name == "summaries_from_issues" and not p.name.startswith("README"))
)
ISSUE = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
UNIT_NS = {"ms": 1e6, "us": 1e3}


def _printed_row(path: Path, name: str, section: str = "Operator Summary") -> tuple[str, list[str]]:
    """The unit and the cells of the first row named ``name`` in ``section``, read with plain string ops."""
    text = path.read_text()
    body = text[text.index(section) :]
    unit = re.search(r"Time unit: (\w+)", body).group(1)
    for line in body.splitlines():
        if line.strip().startswith(name + "  "):
            return unit, [c for c in re.split(r"\s{2,}", line.strip())]
    raise AssertionError(f"{name} not in {path}")


def test_every_real_summary_is_found_and_parses() -> None:
    assert len(SUMMARIES) >= 28
    for path in SUMMARIES:
        result = read_trace(path)
        assert result.source_format == "paddle_summary", path
        assert not result.tables.summary_cells.is_empty(), path


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (ISSUE, "matmul_v2_grad grad_node"),
        (ISSUE, "conv2d_grad grad_node"),
        (SHARED / "paddle/cpu_paddle_3.3.1/paddle_fp32.summary_default.txt", "conv2d dygraph"),
        (SHARED / "paddle/cpu_paddle_3.3.1/paddle_fp32.summary_thread_sep_us.txt", "Global_MatmulGradNode"),
        (SHARED / "paddle/cpu_paddle_2.6.2/paddle_static_fp32.summary_default.txt", "conv2d"),
    ],
)
def test_chosen_op_rows_equal_the_text(path: Path, name: str) -> None:
    unit, cells = _printed_row(path, name)
    calls = int(cells[1])
    cpu_total = float(cells[2].split(" / ")[0]) * UNIT_NS[unit]
    gpu_total = float(cells[3].split(" / ")[0]) * UNIT_NS[unit]
    ops = read_trace(path).tables.op_stats.filter((pl.col("name") == name) & (pl.col("depth") == 0))
    row = ops.row(0, named=True)
    assert row["calls"] == calls
    assert row["cpu_total_ns"] == pytest.approx(cpu_total)
    assert row["gpu_total_ns"] == pytest.approx(gpu_total)


def test_kernel_rows_belong_to_their_op_and_stage() -> None:
    ops = read_trace(ISSUE).tables.op_stats
    sgemm = ops.filter(pl.col("name") == "volta_sgemm_128x128_tn")
    assert sgemm.row(0, named=True)["op"] == "matmul_v2_grad"
    assert sgemm.row(0, named=True)["parent"] == "compute"
    assert sgemm.row(0, named=True)["row_type"] == "kernel"
    assert sgemm.row(0, named=True)["calls"] == 53
    # every kernel row's GPU time sits inside its op's GPU time
    kernels = ops.filter(pl.col("row_type") == "kernel").group_by("op").agg(pl.col("gpu_total_ns").sum().alias("k"))
    tops = ops.filter(pl.col("depth") == 0).group_by("op").agg(pl.col("gpu_total_ns").sum().alias("t"))
    joined = kernels.join(tops, on="op")
    assert (joined["k"] <= joined["t"] * 1.001 + 1e5).all()


@pytest.mark.parametrize("path", [p for p in SUMMARIES if "cpu_paddle" in str(p) or p == ISSUE], ids=lambda p: p.name)
def test_top_level_totals_agree_with_the_printed_ratios(path: Path) -> None:
    """Paddle prints each top-level op's share of the summed top-level CPU (and GPU) time."""
    ops = read_trace(path).tables.op_stats.filter(pl.col("depth") == 0)
    for thread, rows in ops.group_by("thread"):
        for total, ratio in (("cpu_total_ns", "cpu_ratio"), ("gpu_total_ns", "gpu_ratio")):
            whole = rows[total].sum()
            if whole == 0:
                continue
            share = rows[total] / whole * 100
            # both printed with two decimals: a total is off by up to half a unit in the last place
            tolerance = 0.006 + 100 * 0.005 * UNIT_NS["us"] * rows.height / whole + share * 0.0001
            assert ((share - rows[ratio]).abs() <= tolerance + 0.01).all(), (thread, total)


def test_overview_and_memory_tables_are_kept() -> None:
    cells = read_trace(SHARED / "paddle/cpu_paddle_3.3.1/paddle_fp32.summary_default.txt").tables.summary_cells
    op_time = cells.filter(
        (pl.col("section") == "Overview Summary") & (pl.col("name") == "Operator") & (pl.col("column") == "CPU Time")
    )
    assert op_time["value"].to_list() == [pytest.approx(187.02e6)]
    peak = cells.filter(
        pl.col("section").str.starts_with("Memory Summary") & (pl.col("name") == "Peak Allocated Memory")
    )
    assert peak["value"].to_list() == [9159464.0]


def test_text_pasted_from_a_web_page_parses_the_same(tmp_path: Path) -> None:
    text = ISSUE.read_text()
    pasted = "\n\n".join(line.rstrip() for line in text.splitlines())  # no trailing spaces, blank lines added
    cut = pasted[: int(len(pasted) * 0.6)]  # and cut short mid-row
    path = tmp_path / "pasted.txt"
    path.write_text(cut)
    original = read_trace(ISSUE).tables.op_stats
    got = read_trace(path).tables.op_stats
    assert 0 < got.height < original.height
    assert got.drop("row").equals(original.drop("row").head(got.height))


def test_legacy_fluid_event_summary_reads_cast_overhead() -> None:
    path = SHARED / "paddle/summaries_from_issues/Paddle_PR28727_legacy_fluid_profiler_cast_bert_amp.txt"
    cast = read_trace(path).tables.op_stats.filter(pl.col("name") == "cast").row(0, named=True)
    assert cast["calls"] == 5440
    assert cast["cpu_total_ns"] == pytest.approx(953.436569e6)
    assert cast["gpu_total_ns"] == pytest.approx(134.841113e6)


@pytest.mark.parametrize(
    "text",
    [
        "hello world\nthis is a plain note\n",
        "-----\nname  value\n-----\na  1\n",
        "Operator Summary mentioned in prose.",
    ],
)
def test_unrelated_text_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "notes.txt"
    path.write_text(text)
    with pytest.raises(InputError):
        read_trace(path)
    store = tmp_path / "store"
    done = run_cli("ingest", "--store", str(store), str(path))
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1
    assert tree_state(store) == {}


def test_summary_title_without_rows_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty_table.txt"
    path.write_text("----------Operator Summary----------\nTime unit: ms\n")
    with pytest.raises(InputError, match="no table rows"):
        parse_summary(path.read_text(), path)


def test_summary_kernel_rows_are_classified_like_trace_kernels(tmp_path: Path) -> None:
    import traceq

    store = tmp_path / "store"
    fragment = SHARED / "paddle/summaries_from_issues/Paddle_issue_48321_amp_slower_fragment1.txt"
    traceq.ingest([ISSUE, fragment], store=store, jobs=1)
    rows = traceq.sql(
        "select o.name, k.precision, k.tensor_core, k.kernel_class from op_stats o join kernel_classes k "
        "using (run_id, rank, name) where o.row_type = 'kernel' and o.name in "
        "('volta_sgemm_128x128_tn', 'turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn') order by o.name",
        store,
    )
    assert rows.rows() == [
        ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn", "fp16", True, "gemm"),
        ("volta_sgemm_128x128_tn", "fp32", False, "gemm"),
    ]
