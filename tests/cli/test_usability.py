"""What users of nsys and sqlite-utils expect of a command: --version, shell completion, runs rm/rename, metric
queries by name, help that lists only the formats a command writes, options it would ignore refused, the store
found like git finds its repository, missing files named, ``str`` paths, readable numbers, JSON lists as lists
and a progress bar that fits 80 columns."""

from __future__ import annotations

import io
import json
import re
import sys
from importlib.metadata import version
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import traceq
from tests.conftest import ROOT, SAMPLES, SHARED, raw_trace, run_cli, run_process, tree_state

TRITON = SAMPLES / "hta_triton_example.json.gz"
FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
FP16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
DDP32 = SAMPLES / "ddp" / "fp32"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _one_line_error(done, *parts: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for part in parts:
        assert part in lines[0], lines[0]


def _catalog_rows(store: Path) -> dict[str, dict]:
    """The catalog read with pyarrow alone: run id -> its ``runs.parquet`` row."""
    rows = {}
    for path in sorted((store / "runs").glob("run_id=*/runs.parquet")):
        rows[path.parent.name.removeprefix("run_id=")] = pq.read_table(path).to_pylist()[0]
    return rows


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("usability") / "store"
    done = run_cli("ingest", "--store", str(store), "-j", "1", str(FP32), str(FP16))
    assert done.returncode == 0, done.stderr
    return store


# -- version and completion --------------------------------------------------------------------------
def test_version_option_prints_the_installed_version_and_the_command_stays() -> None:
    done = run_process("--version")
    assert done.returncode == 0 and done.stdout == f"traceq {version('traceq')}\n" and done.stderr == ""
    assert run_cli("version").stdout.splitlines()[0] == f"traceq {version('traceq')}"  # as --version prints it


def test_bash_completion_script_and_completions() -> None:
    # the script as `traceq --show-completion bash` prints it, asked for by the variable that command sets
    # (the option itself also asks the parent process which shell it is, which a test runner may hide)
    script = run_process(env={"_TRACEQ_COMPLETE": "source_bash"})
    assert script.returncode == 0, script.stderr
    assert "complete -o default -F _traceq_completion traceq" in script.stdout
    assert "_TRACEQ_COMPLETE=complete_bash" in script.stdout

    def complete(*words: str) -> list[str]:
        env = {"_TRACEQ_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(("traceq", *words)),
               "COMP_CWORD": str(len(words))}  # fmt: skip
        done = run_process(env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("ru") == ["runs"]
    assert complete("runs", "r") == ["rm", "rename"]
    assert complete("report", "--format", "") == ["table", "json", "markdown", "html"]


# -- runs rm / rename --------------------------------------------------------------------------------
def test_runs_rename_rewrites_the_name_alone_and_refuses_a_taken_one(tmp_path: Path) -> None:
    store = tmp_path / "store"
    traceq.ingest([str(TRITON), str(SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz")], store=store, jobs=1)
    before = _catalog_rows(store)
    (triton_id,) = [r for r, row in before.items() if row["name"] == "hta_triton_example"]
    done = run_cli("runs", "rename", "hta_triton_example", "triton", "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"renamed hta_triton_example ({triton_id}) to triton\n"
    after = _catalog_rows(store)
    assert after[triton_id] == {**before[triton_id], "name": "triton"}
    assert {r: row for r, row in after.items() if r != triton_id} == {
        r: row for r, row in before.items() if r != triton_id
    }
    assert traceq.run_report("triton", store).run["run_id"] == triton_id
    assert not list((store / "runs" / f"run_id={triton_id}").glob(".*"))  # nothing staged left behind

    other = next(row["name"] for r, row in after.items() if r != triton_id)
    _one_line_error(run_cli("runs", "rename", "triton", other, "--store", str(store)), other, "already the name")
    _one_line_error(run_cli("runs", "rename", "nosuchrun", "x", "--store", str(store)), "nosuchrun", "no such run")
    assert _catalog_rows(store) == after


def test_runs_rm_removes_one_run_and_leaves_the_others_as_they_were(tmp_path: Path) -> None:
    store = tmp_path / "store"
    traceq.ingest(str(TRITON), store=str(store))
    traceq.ingest([FP32], store=store, jobs=1)
    ids = {row["name"]: r for r, row in _catalog_rows(store).items()}
    kept = store / "runs" / f"run_id={ids['kineto_conformer_fp32_b4_2steps']}"
    kept_before = tree_state(kept)
    done = run_cli("runs", "rm", "hta_triton_example", "--store", str(store))
    assert done.returncode == 0 and done.stdout == f"removed hta_triton_example ({ids['hta_triton_example']})\n"
    assert not (store / "runs" / f"run_id={ids['hta_triton_example']}").exists()
    assert list((store / "tmp").iterdir()) == []
    assert tree_state(kept) == kept_before
    listed = json.loads(run_cli("runs", "--store", str(store), "--format", "json").stdout)
    assert [r["run_id"] for r in listed] == [ids["kineto_conformer_fp32_b4_2steps"]]
    _one_line_error(run_cli("runs", "rm", "hta_triton_example", "--store", str(store)), "hta_triton_example")
    _one_line_error(run_cli("runs", "--store", str(store), "rm", "x"), "--store goes after `runs rm`")
    assert traceq.remove_run("kineto_conformer_fp32_b4_2steps", store) == ids["kineto_conformer_fp32_b4_2steps"]
    assert traceq.runs(store).height == 0


# -- metric queries by name --------------------------------------------------------------------------
def test_query_by_name_runs_the_installed_metric_outside_the_repository(two_runs: Path, tmp_path: Path) -> None:
    run_id = traceq.runs(two_runs).filter(name="kineto_conformer_fp16_b4_2steps")["run_id"][0]
    args = ("--store", str(two_runs), "--format", "json")
    done = run_cli("query", "gpu_busy", "--run", "kineto_conformer_fp16_b4_2steps", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {r["run_id"] for r in rows} == {run_id}
    # the same file run through `sql -f` from the repository gives the same rows, for every run
    every = json.loads(run_cli("query", "gpu_busy", *args, cwd=tmp_path).stdout)
    by_file = json.loads(run_cli("sql", "-f", str(ROOT / "queries" / "gpu_busy.sql"), *args).stdout)
    assert every == by_file and len({r["run_id"] for r in every}) == 2
    # busy time per step never exceeds the GPU time the raw trace lists for the whole run
    raw = raw_trace(FP16)["traceEvents"]
    gpu_ns = sum(e["dur"] * 1000 for e in raw if e.get("cat") in GPU_CATS)
    assert 0 < sum(r["busy_ns"] for r in rows if r["step"] is not None) <= gpu_ns + len(raw)
    _one_line_error(run_cli("query", "nosuch", "--store", str(two_runs)), "nosuch", "no such query")


def test_queries_lists_every_metric_file_and_names_the_command_that_runs_them() -> None:
    done = run_cli("queries", "--format", "json")
    names = [r["name"] for r in json.loads(done.stdout)]
    assert names == sorted(p.stem for p in (ROOT / "queries").glob("*.sql") if not p.name.startswith("_"))
    assert "traceq query NAME" in run_cli("queries", "--help").stdout


# -- formats and options a command would ignore ------------------------------------------------------
FRAME_FORMATS = "table|csv|json|markdown|parquet"


@pytest.mark.parametrize(
    ("command", "formats"),
    [
        (["ingest"], FRAME_FORMATS),
        (["runs"], FRAME_FORMATS),
        (["sql"], FRAME_FORMATS),
        (["query"], FRAME_FORMATS),
        (["queries"], FRAME_FORMATS),
        (["report"], "table|json|markdown|html"),
    ],
)
def test_help_lists_only_the_formats_the_command_writes(command: list[str], formats: str) -> None:
    text = re.sub(r"[\s│]+", "", run_cli(*command, "--help", env={"COLUMNS": "200"}).stdout)
    assert f"[{formats}]" in text


def test_a_format_the_command_does_not_write_is_a_usage_error(two_runs: Path) -> None:
    for args in (["runs", "--format", "html"], ["sql", "select 1", "--format", "html"], ["report", "--format", "csv"]):
        done = run_cli(*args, "--store", str(two_runs))
        assert done.returncode == 2 and "Invalid value for '--format'" in done.stderr, args
    page = run_cli("report", "kineto_conformer_fp16_b4_2steps", "--format", "html", "--store", str(two_runs))
    assert page.returncode == 0 and page.stdout.startswith("<!doctype html>")  # a single run's page too


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "kineto_conformer_fp16_b4_2steps", "--fail-if-slower", "5"], "--fail-if-slower needs --compare"),
        (["report", "kineto_conformer_fp16_b4_2steps", "--new-step-ms", "30"], "--new-step-ms needs --compare"),
        (["report", "--base-step-ms", "3", "--new-step-ms", "4"], "--base-step-ms needs --compare"),
        (["ingest", str(TRITON), "--executor", "ray", "--jobs", "2"], "--jobs is for --executor local"),
    ],
)
def test_an_option_the_command_would_ignore_is_refused(two_runs: Path, args: list[str], message: str) -> None:
    before = tree_state(two_runs)
    _one_line_error(run_cli(*args, "--store", str(two_runs)), message)
    assert tree_state(two_runs) == before


# -- where the store is ------------------------------------------------------------------------------
def test_the_store_is_found_walking_up_then_env_then_the_user_data_folder(tmp_path: Path) -> None:
    if sys.platform in ("win32", "darwin"):
        pytest.skip("the user data folder checked here is Linux's ($XDG_DATA_HOME)")
    project, data = tmp_path / "project", tmp_path / "data"
    deeper = project / "src" / "deeper"
    deeper.mkdir(parents=True)
    unset = {"TRACEQ_STORE": None, "XDG_DATA_HOME": str(data)}
    # nothing found: a new store in the user's data folder
    done = run_cli("ingest", str(TRITON), env=unset, cwd=deeper)
    assert done.returncode == 0, done.stderr
    assert (data / "traceq" / "store" / "traceq-store.json").is_file()
    assert not (deeper / ".traceq").exists() and not (project / ".traceq").exists()
    # a .traceq store in a folder above the working directory is found first
    done = run_cli("ingest", "--store", str(project / ".traceq"), str(FP32), "-j", "1", env=unset)
    assert done.returncode == 0, done.stderr
    names = [r["name"] for r in json.loads(run_cli("runs", "--format", "json", env=unset, cwd=deeper).stdout)]
    assert names == ["kineto_conformer_fp32_b4_2steps"]
    names = [r["name"] for r in json.loads(run_cli("runs", "--format", "json", env=unset, cwd=tmp_path).stdout)]
    assert names == ["hta_triton_example"]
    # $TRACEQ_STORE names the store wherever one is found
    env = {**unset, "TRACEQ_STORE": str(data / "traceq" / "store")}
    names = [r["name"] for r in json.loads(run_cli("runs", "--format", "json", env=env, cwd=deeper).stdout)]
    assert names == ["hta_triton_example"]


def test_a_store_path_that_holds_no_store_is_an_error_naming_it(tmp_path: Path) -> None:
    typo = tmp_path / "stroe"
    for args, env in ((["--store", str(typo)], None), ([], {"TRACEQ_STORE": str(typo)})):
        for command in (["runs"], ["sql", "select 1"], ["query", "gpu_busy"], ["report"], ["runs", "rm", "x"]):
            _one_line_error(run_cli(*command, *args, env=env), str(typo), "no such store")
    assert not typo.exists()


def test_report_of_a_missing_file_says_no_such_file(two_runs: Path, tmp_path: Path) -> None:
    missing = tmp_path / "missing.json.gz"
    _one_line_error(run_cli("report", str(missing), "--store", str(two_runs)), str(missing), "no such file")
    _one_line_error(run_cli("report", "--compare", "kineto_conformer_fp16_b4_2steps", str(missing), "--store",
                            str(two_runs)), str(missing), "no such file")  # fmt: skip
    _one_line_error(run_cli("report", "nosuchrun", "--store", str(two_runs)), "nosuchrun", "no such run")


# -- the Python API takes str paths ------------------------------------------------------------------
def test_the_api_takes_str_paths(tmp_path: Path) -> None:
    raw = raw_trace(TRITON)["traceEvents"]
    read = traceq.read_trace(str(TRITON))
    assert read.tables.events.height == sum(1 for e in raw if e.get("ph") in ("X", "i", "I"))
    summary = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
    if summary.exists():
        assert traceq.read_trace(str(summary)).tables.op_stats.height > 0
    store = str(tmp_path / "store")
    rows = traceq.ingest(str(TRITON), store=store)
    assert rows["status"].to_list() == ["ingested"]
    run_id = rows["run_id"][0]
    assert traceq.runs(store)["run_id"].to_list() == [run_id]
    assert traceq.sql("select count(*) n from events", store)["n"][0] == read.tables.events.height
    assert traceq.query("gpu_busy", store, run_id)["run_id"].unique().to_list() == [run_id]
    assert traceq.run_report(str(TRITON), store).run["run_id"] == run_id  # a file as a str: already stored
    assert traceq.rename_run(run_id, "t", store) == run_id and traceq.runs(store)["name"].to_list() == ["t"]


# -- readable output ---------------------------------------------------------------------------------
_REPR = re.compile(r"\bNone\b|\{\}|\[\]|\bnan\b|\b\d(\.\d+)?[eE][+-]\d+\b|<[a-z_.]+ object")


def test_reports_print_no_python_reprs(two_runs: Path, tmp_path: Path) -> None:
    """Evidence, headlines and tables of a single run, a two-rank run and a comparison, in the terminal and
    Markdown forms."""
    store = tmp_path / "store"
    assert run_cli("ingest", str(DDP32), "--name", "ddp", "-j", "1", "--store", str(store)).returncode == 0
    cases = [(store, ["report", "ddp"])]
    summary = SHARED / "paddle" / "issue48321_fp32_operator_summary.txt"
    if summary.exists():  # Paddle summary text: an op-level report
        assert run_cli("ingest", str(summary), "--store", str(store)).returncode == 0
        cases.append((store, ["report", "issue48321_fp32_operator_summary"]))
    cases += [
        (two_runs, ["report", "kineto_conformer_fp16_b4_2steps"]),
        (two_runs, ["report", "--compare"]),
    ]
    for where, args in cases:
        for fmt in ("table", "markdown"):
            done = run_cli(*args, "--format", fmt, "--store", str(where))
            assert done.returncode == 0, done.stderr
            found = [line for line in done.stdout.splitlines() if _REPR.search(line)]
            assert found == [], (args, fmt, found[:3])


def test_numbers_in_tables_have_no_exponent() -> None:
    from traceq.render.frames import cell

    assert [cell(v) for v in (1160.0, 0.215, 0.00001234, 9999.4, 123456.7, -0.5, 1.0, 0.0, float("nan"))] == [
        "1,160", "0.215", "0.00001234", "9,999", "123,457", "-0.5", "1", "0", "n/a",
    ]  # fmt: skip


def test_json_fields_that_hold_lists_are_lists(two_runs: Path) -> None:
    listed = json.loads(run_cli("runs", "--store", str(two_runs), "--format", "json").stdout)
    stored = _catalog_rows(two_runs)
    for row in listed:
        for column in ("warnings", "devices", "distributed", "events_by_kind"):
            assert row[column] == json.loads(stored[row["run_id"]][column]), column
        assert isinstance(row["warnings"], list) and isinstance(row["devices"], list)
        assert row["devices"][0]["name"] == "NVIDIA H200"
    query = "select args from events where kind = 'kernel' order by rank, event_id limit 1"
    (event,) = json.loads(run_cli("sql", query, "--store", str(two_runs), "--format", "json").stdout)
    assert isinstance(event["args"], dict) and "correlation" in event["args"]


def test_ingest_json_lists_its_warnings(tmp_path: Path) -> None:
    done = run_cli("ingest", str(TRITON), "--store", str(tmp_path / "s"), "--format", "json")
    (row,) = json.loads(done.stdout)
    assert row["warnings"] == json.loads(traceq.runs(tmp_path / "s")["warnings"][0])
    assert isinstance(row["warnings"], list)


def test_the_progress_bar_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console
    from rich.segment import Segment

    from traceq.cli import _progress

    monkeypatch.setenv("COLUMNS", "80")
    console = Console(file=io.StringIO(), force_terminal=True, emoji=False)
    assert console.width == 80
    long = "reading " + "conformer_fp16_b64_" * 6 + "rank3.json.gz"
    with _progress(False, console) as factory:
        first, second = factory(long, 500 << 20), factory("reading short.json", 8 << 20)
        assert first is not None and second is not None
        first(300 << 20)
        second(1 << 20)
        shown = [console.render_lines(first.bar.get_renderable(), console.options, pad=False)]
        first.stage("building the model on disk (1,234,567 events)")
        shown.append(console.render_lines(first.bar.get_renderable(), console.options, pad=False))
    for lines in shown:
        assert len(lines) == 2  # one line per file
        assert all(Segment.get_line_length(line) <= 80 for line in lines)
        texts = ["".join(s.text for s in line) for line in lines]
        assert "314.6/524.3 MB" in texts[0] and "1.0/8.4 MB" in texts[1]
    assert texts[0].startswith("building the model on disk (1,234,567 events)")  # the stage first, the name cut
