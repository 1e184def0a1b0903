"""``traceq report`` without runs: the latest run, ``--compare`` the two latest or NEW and the run before
it; the README's quick start, run as written in a fresh store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import traceq
from tests.conftest import SAMPLES, SHARED, run_cli
from traceq.errors import StoreError
from traceq.store import Store

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
BASE, NEW = "kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"


@pytest.fixture(scope="module")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The README's quick start after the install, in a fresh store named by $TRACEQ_STORE: ingest the
    FP32 sample, then the AMP one, then ``traceq report --compare``."""
    work = tmp_path_factory.mktemp("quick_start")
    env = {"TRACEQ_STORE": str(work / "store")}
    for trace in (FP32, FP16):
        done = run_cli("ingest", str(trace.relative_to(SAMPLES.parent)), env=env, cwd=SAMPLES.parent)
        assert done.returncode == 0, done.stderr
    done = run_cli("report", "--compare", env=env, cwd=SAMPLES.parent)
    assert done.returncode == 0, done.stderr
    return work / "store", {"stdout": done.stdout, "stderr": done.stderr}


def _ids(store: Path) -> dict[str, str]:
    return dict(traceq.runs(store).select("name", "run_id").iter_rows())


def test_the_quick_start_compares_the_two_latest_runs(quick_start: tuple[Path, dict[str, str]]) -> None:
    store, out = quick_start
    ids = _ids(store)
    assert out["stderr"] == (
        f"traceq: comparing BASE {BASE} ({ids[BASE]}) with NEW {NEW} ({ids[NEW]}), the two latest runs\n"
    )
    assert f"BASE {BASE} ({ids[BASE]})  NEW {NEW} ({ids[NEW]})" in out["stdout"]
    # the verdict leads with the estimate without the profiler: AMP slower, as the clean rounds' medians of
    # the shared traces these samples were cut from say; then the traced steps, where AMP's is 2.5 ms shorter
    runs = {r["trace"]: r["step_ms_clean"] for r in json.loads((SHARED / "kineto" / "runs.json").read_text())["runs"]}
    assert runs["conformer_fp16_b4.json.gz"] > runs["conformer_fp32_b4.json.gz"]
    text = " ".join(out["stdout"].split())
    estimate = re.search(r"Estimated without the profiler \(replay\), NEW is ([\d.]+)% (faster|slower)", text)
    assert estimate is not None and estimate.group(2) == "slower", text[:600]
    traced = re.search(r"Traced: NEW is ([\d.]+) ms per step (faster|slower)", text)
    assert traced is not None and traced.groups() == ("2.5", "faster"), text[:600]


def test_readme_quick_start_is_this_flow() -> None:
    readme = (SAMPLES.parent / "README.md").read_text()
    line = next(
        x for x in readme.splitlines() if x.startswith("python3 -m venv .venv && .venv/bin/pip install -q -e . ")
    )
    assert line.endswith(
        f".venv/bin/traceq ingest sample_traces/{FP32.name} && .venv/bin/traceq ingest sample_traces/{FP16.name}"
        " && .venv/bin/traceq report --compare"
    )
    assert "Traced: NEW is 2.5 ms per step faster" in " ".join(readme.split())


def test_compare_with_new_alone_takes_the_run_ingested_before_it(quick_start: tuple[Path, dict[str, str]]) -> None:
    store, _ = quick_start
    ids = _ids(store)
    done = run_cli("report", "--compare", NEW, "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f"traceq: comparing BASE {BASE} ({ids[BASE]}), the run ingested before it, with NEW {NEW} ({ids[NEW]})\n"
    )
    d = json.loads(done.stdout)
    assert (d["base"]["run"]["name"], d["new"]["run"]["name"]) == (BASE, NEW)
    assert d["step_time_delta_ms"] < 0 and "faster" in d["verdict"]


def test_compare_with_both_runs_is_as_named(quick_start: tuple[Path, dict[str, str]]) -> None:
    store, _ = quick_start
    done = run_cli("report", "--compare", NEW, BASE, "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # nothing picked
    d = json.loads(done.stdout)
    assert (d["base"]["run"]["name"], d["new"]["run"]["name"]) == (NEW, BASE)
    assert d["step_time_delta_ms"] > 0 and "slower" in d["verdict"]


def test_report_without_a_run_explains_the_latest(quick_start: tuple[Path, dict[str, str]]) -> None:
    store, _ = quick_start
    ids = _ids(store)
    done = run_cli("report", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"traceq: explaining {NEW} ({ids[NEW]}), the latest run\n"
    assert json.loads(done.stdout)["run"]["name"] == NEW


def test_the_library_picks_the_same_runs(quick_start: tuple[Path, dict[str, str]]) -> None:
    store, _ = quick_start
    ids = _ids(store)
    s = Store(store)
    assert s.latest(2) == [ids[BASE], ids[NEW]] and s.latest(1) == [ids[NEW]] and s.latest(5) == s.latest(2)
    assert s.before(ids[NEW]) == ids[BASE] and s.before(ids[BASE]) is None
    diff = traceq.compare(store=store)
    assert (diff.base.run["name"], diff.new.run["name"]) == (BASE, NEW)
    assert traceq.compare(new_ref=NEW, store=store).step_time_delta_ms == diff.step_time_delta_ms
    assert traceq.run_report(store=store).run["name"] == NEW


@pytest.mark.parametrize(
    ("ingested", "args", "message"),
    [
        (None, ["report"], "no such store (nothing was ingested there"),
        ([], ["report"], "holds no runs; ingest a trace first (traceq ingest FILE)"),
        ([], ["report", "--compare"], "the store holds no runs; --compare needs two (ingest two traces)"),
        ([FP32], ["report", "--compare"], "the store holds 1 run; --compare needs two (ingest another trace)"),
        ([FP32], ["report", "--compare", BASE], f"{BASE}: the store's first run; no run was ingested before it"),
        ([FP32], ["report", BASE, NEW], "give one RUN, or --compare [[BASE] NEW]"),
        ([FP32], ["report", "--compare", "a", "b", "c"], "--compare takes BASE NEW"),
        ([FP32], ["report", BASE, "--base-step-ms", "30"], "--base-step-ms needs --compare"),
    ],
)
def test_too_few_runs_and_wrong_counts_are_refused_in_one_line(
    tmp_path: Path, ingested: list[Path] | None, args: list[str], message: str
) -> None:
    store = tmp_path / "store"
    if ingested is not None:  # [] : a store whose only run was removed
        traceq.ingest(ingested or [SAMPLES / "hta_triton_example.json.gz"], store=store, jobs=1)
    if ingested == []:
        traceq.remove_run("hta_triton_example", store)
    done = run_cli(*args, "--store", str(store), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("traceq: error: ") and done.stderr.count("\n") == 1
    assert message in done.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_comparison_with_base_alone_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="needs its NEW"):
        traceq.compare(BASE, store=tmp_path / "store")
