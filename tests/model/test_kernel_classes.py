"""The kernel-name rule table against expectations written from what the names mean, and on every name seen."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import SHARED, chrome_traces
from traceq.model.kernel_classes import KERNEL_CLASSES, PRECISIONS, classify
from traceq.readers import read_trace

DATA = Path(__file__).resolve().parents[1] / "data"
#: Names whose classes were written by hand from what the names mean.
EXPECTED = DATA / "kernel_classes.csv"
#: Every kernel name in the shared traces with its class: the rule table's output, reviewed family by
#: family (the review fixed `nocast`, `lambda`, `LoadWithCast`, mangled cutlass conv and layout names).
ALL_NAMES = DATA / "kernel_classes_all.csv"


def _expected(path: Path = EXPECTED) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("row", _expected(), ids=lambda r: r["name"][:60])
def test_known_kernel_names(row: dict[str, str]) -> None:
    got = classify(pl.Series([row["name"]])).row(0, named=True)
    assert (got["precision"], got["tensor_core"], got["kernel_class"]) == (
        row["precision"],
        row["tensor_core"] == "true",
        row["kernel_class"],
    )


@pytest.fixture(scope="module")
def every_kernel_name() -> pl.DataFrame:
    """Every kernel name in the real traces (JSON and nsys) and in the Paddle summaries from issues."""
    paths = [p for p in chrome_traces() if "sample_traces" not in str(p)]
    paths += sorted((SHARED / "nsys").glob("*.sqlite.gz"))
    paths += [SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"]
    paths += sorted(p for p in (SHARED / "paddle" / "summaries_from_issues").glob("*.txt") if p.name != "README.txt")
    names: set[str] = set()
    for p in paths:
        tables = read_trace(p).tables
        names |= set(tables.events.filter(pl.col("kind") == "kernel")["name"].to_list())
        names |= set(tables.op_stats.filter(pl.col("row_type") == "kernel")["name"].to_list())
    return classify(pl.Series(sorted(names)))


@pytest.mark.slow
def test_every_name_gets_a_class_from_the_vocabulary(every_kernel_name: pl.DataFrame) -> None:
    assert every_kernel_name.height > 800
    assert set(every_kernel_name["precision"]) <= set(PRECISIONS)
    assert set(every_kernel_name["kernel_class"]) <= set(KERNEL_CLASSES)
    assert (every_kernel_name["kernel_class"] == "other").mean() < 0.05


@pytest.mark.slow
def test_negative_markers_win_over_positive_ones(every_kernel_name: pl.DataFrame) -> None:
    simt = every_kernel_name.filter(pl.col("name").str.contains(r"(?i)ffma|sgemm|_simt_|gemv|scudnn"))
    assert simt.height > 50
    assert not simt["tensor_core"].any()


@pytest.mark.slow
def test_hopper_and_cublas12_names_are_tensor_core(every_kernel_name: pl.DataFrame) -> None:
    modern = every_kernel_name.filter(pl.col("name").str.contains(r"^nvjet_|wgmma|_tensor16x8x"))
    assert modern.height > 30
    assert modern["tensor_core"].all()
    assert modern.filter(pl.col("name").str.starts_with("nvjet_"))["kernel_class"].unique().to_list() == ["gemm"]


@pytest.mark.slow
def test_every_name_in_the_shared_traces_keeps_its_reviewed_class(every_kernel_name: pl.DataFrame) -> None:
    reviewed = {
        r["name"]: (r["precision"], r["tensor_core"] == "true", r["kernel_class"]) for r in _expected(ALL_NAMES)
    }
    got = {r[0]: (r[1], r[2], r[3]) for r in every_kernel_name.iter_rows()}
    assert set(got) == set(reviewed), "kernel names changed: review the new ones and update the data file"
    changed = {n: (reviewed[n], got[n]) for n in got if got[n] != reviewed[n]}
    assert not changed, f"{len(changed)} names changed class, e.g. {next(iter(changed.items()))}"
