"""Names are data, not markup nor terminal commands: a run named ``[/bold]``, an op named ``[/oops]``,
``[red]x[/red]`` and raw escape sequences in event and file names are shown as written, visibly, by every
terminal output; JSON and CSV keep them exactly."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, run_cli

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
#: the op with the most CPU time in the trace, so that the report's top ops and findings show it
HEAVY_OP = "autograd::engine::evaluate_function: AddmmBackward0"
OP = "[/oops] \x1b[31mred\x1b[0m [red]x[/red] :smile:"
RUN = "[/bold]"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The FP32 sample with its heaviest op renamed ``OP``, in a file whose name holds an escape
    sequence, ingested as the run ``[/bold]``."""
    tmp = tmp_path_factory.mktemp("hostile_names")
    doc = json.loads(gzip.decompress(FP32.read_bytes()))
    renamed = 0
    for event in doc["traceEvents"]:
        if event.get("name") == HEAVY_OP:
            event["name"] = OP
            renamed += 1
    assert renamed > 0
    trace = tmp / "evil\x1b[2Jname.json"
    trace.write_text(json.dumps(doc))
    root = tmp / "store"
    done = run_cli("ingest", "--store", str(root), "--name", RUN, str(trace))
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and RUN in done.stdout
    return root


def _shown(done: object) -> str:
    assert done.returncode == 0, done.stderr  # type: ignore[attr-defined]
    out = done.stdout + done.stderr  # type: ignore[attr-defined]
    assert "\x1b" not in out and "\x9b" not in out  # no escape sequence reaches the terminal
    return out


def test_runs_lists_a_run_named_like_markup(store: Path) -> None:
    out = _shown(run_cli("runs", "--store", str(store)))
    assert RUN in out


def test_sql_tables_show_names_as_written_and_escapes_visibly(store: Path) -> None:
    query = "SELECT DISTINCT e.name, r.name AS run, r.source_path FROM events e JOIN runs r USING (run_id) "
    query += "WHERE e.name LIKE '%oops%'"
    out = _shown(run_cli("sql", "--store", str(store), query))
    assert "[/oops] \\x1b[31mred\\x1b[0m [red]x[/red] :smile:" in out
    assert RUN in out and "evil\\x1b[2Jname.json" in out
    markdown = _shown(run_cli("sql", "--store", str(store), "--format", "markdown", query))
    assert "[/oops] \\x1b[31mred" in markdown


def test_json_and_csv_keep_the_exact_names(store: Path) -> None:
    query = "SELECT DISTINCT name FROM events WHERE name LIKE '%oops%'"
    done = run_cli("sql", "--store", str(store), "--format", "json", query)
    assert done.returncode == 0 and json.loads(done.stdout) == [{"name": OP}]
    done = run_cli("sql", "--store", str(store), "--format", "csv", query)
    assert done.returncode == 0 and list(csv.DictReader(io.StringIO(done.stdout))) == [{"name": OP}]


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_report_shows_the_run_and_its_ops_as_written(store: Path, fmt: str) -> None:
    out = _shown(run_cli("report", RUN, "--store", str(store), "--format", fmt))
    assert RUN in out
    assert "[/oops] \\x1b[31mred" in out  # among the top ops and the CPU activity during gaps
    done = run_cli("report", RUN, "--store", str(store), "--format", "json")
    assert done.returncode == 0 and json.loads(done.stdout)["run"]["name"] == RUN


def test_compare_shows_names_as_written(store: Path) -> None:
    out = _shown(run_cli("report", "--store", str(store), "--compare", RUN, RUN))
    assert f"BASE {RUN}" in out


def test_an_error_naming_a_file_shows_its_escapes(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x1b[31m.json"
    done = run_cli("ingest", "--store", str(tmp_path / "store"), str(missing))
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "gone\\x1b[31m.json" in done.stderr
