"""A run that stores everything its report reads also stores the report as ``traceq report RUN`` prints it
(made at ingest): the command shows it without Polars or the analysis, and the same text as the report
computed; a document made for another name, by other code, or unreadable is not shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import traceq
from tests.cli.test_start_imports import FP16, RUN, loaded
from tests.conftest import SAMPLES, Ingested, run_cli
from traceq.ingestion import metrics
from traceq.render import report_document
from traceq.store import check_store

FP32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
#: The report's forms a stored document may be shown in, as command arguments after RUN.
FORMS = [(), ("--format", "table"), ("--format", "json")]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The FP32 sample, then the FP16 one, each storing all its report reads, as the largest runs do."""
    root = tmp_path_factory.mktemp("documents") / "store"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "STORE_MIN_EVENTS", 0)
        patch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)
        traceq.ingest([FP32, FP16], store=root, jobs=1)
    return root


def _document(store: Path) -> Path:
    (run_dir,) = (d for d in (store / "runs").iterdir() if (d / "runs.json").read_text().count(f'"{RUN}"'))
    return run_dir / report_document.DOCUMENT


def _computed(store: Path, *args: str) -> tuple[str, str]:
    """What ``traceq ARGS`` prints with the stored documents set aside: the report computed."""
    documents = list((store / "runs").glob(f"*/{report_document.DOCUMENT}"))
    for path in documents:
        path.rename(path.with_suffix(".aside"))
    try:
        done = run_cli(*args, "--store", str(store))
    finally:
        for path in documents:
            path.with_suffix(".aside").rename(path)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_every_run_storing_its_estimate_stores_its_report_and_no_other_does(stored: Path, ingested: Ingested) -> None:
    assert len(list((stored / "runs").glob(f"*/{report_document.DOCUMENT}"))) == 2
    assert not list((stored / "tmp").iterdir())  # staged there, then renamed into the run's folder
    assert check_store(traceq.Store(stored)).is_empty()  # the catalog's list of files does not name it
    small = ingested.store(FP16)  # below the sizes that store the diagnosis and the estimate
    assert not list((small / "runs").glob(f"*/{report_document.DOCUMENT}"))


@pytest.mark.parametrize("form", FORMS, ids=lambda f: " ".join(f) or "default")
@pytest.mark.parametrize("which", [(RUN,), ()], ids=["named", "latest"])
def test_a_stored_report_is_shown_as_it_is_computed(
    stored: Path, which: tuple[str, ...], form: tuple[str, ...]
) -> None:
    shown = run_cli("report", *which, *form, "--store", str(stored))
    assert shown.returncode == 0, shown.stderr
    assert (shown.stdout, shown.stderr) == _computed(stored, "report", *which, *form)
    if form[-1:] == ("json",):
        assert json.loads(shown.stdout)["run"]["name"] == RUN
    else:
        assert RUN in shown.stdout.splitlines()[0] and "Step time without the profiler (replay)" in shown.stdout


@pytest.mark.parametrize("form", [(), ("--format", "json")], ids=["table", "json"])
def test_a_stored_report_is_shown_without_polars_or_the_analysis(stored: Path, form: tuple[str, ...]) -> None:
    absent = {"polars", "pyarrow", "duckdb", "traceq.analysis", "traceq.readers"}
    assert loaded(stored, "report", RUN, *form) & absent == set()
    # the same command with the document set aside computes the report: the check above can fail
    document = _document(stored)
    document.rename(document.with_suffix(".aside"))
    try:
        assert "polars" in loaded(stored, "report", RUN, *form)
    finally:
        document.with_suffix(".aside").rename(document)


@pytest.mark.parametrize(
    "option", [("--what-if",), ("--all",), ("--traced-only",), ("--format", "markdown"), ("--steps-from", "Profiler")]
)
def test_a_report_asked_with_options_is_computed(stored: Path, option: tuple[str, ...]) -> None:
    assert "traceq.analysis" in loaded(stored, "report", RUN, *option)


def test_a_document_made_for_another_name_by_other_code_or_unreadable_is_not_shown(
    stored: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    shutil.copytree(stored, store)
    document = _document(store)
    text = document.read_text()

    traceq.rename_run(RUN, "renamed", store=store)  # its document names the old name: computed
    renamed = run_cli("report", "renamed", "--store", str(store))
    assert "renamed" in renamed.stdout.splitlines()[0] and RUN not in renamed.stdout.splitlines()[0]
    assert (renamed.stdout, renamed.stderr) == _computed(store, "report", "renamed")
    traceq.rename_run("renamed", RUN, store=store)
    assert report_document.stored(traceq.Store(store), traceq.Store(store).resolve(RUN)) is not None

    doc = json.loads(text)
    for made in ({**doc, "made_by": "another traceq"}, {**doc, "row": {**doc["row"], "files": "{}"}}):
        document.write_text(json.dumps({**made, "json": "made by other code\n"}))
        assert report_document.stored(traceq.Store(store), traceq.Store(store).resolve(RUN)) is None
        assert (
            run_cli("report", RUN, "--format", "json", "--store", str(store)).stdout
            == _computed(store, "report", RUN, "--format", "json")[0]
        )
    blocks = [*doc["blocks"][:-1], [*doc["blocks"][-1][:2], [["name", "no"]], [[1]]]]
    document.write_text(json.dumps({**doc, "blocks": blocks}))  # of this traceq and this run, but changed
    assert report_document.stored(traceq.Store(store), traceq.Store(store).resolve(RUN)) is None
    document.write_text(text[: len(text) // 2])  # cut short
    done = run_cli("report", RUN, "--store", str(store))
    assert done.returncode == 0 and done.stdout == _computed(store, "report", RUN)[0]


def test_the_command_ingest_stores_the_document_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "STORE_MIN_EVENTS", 0)
    monkeypatch.setattr(metrics, "DIAGNOSIS_MIN_EVENTS", 0)
    done = run_cli("ingest", str(FP16), "--store", str(tmp_path / "store"), "--quiet")
    assert done.returncode == 0, done.stderr
    document = _document(tmp_path / "store")
    assert json.loads(document.read_text())["made_by"] == report_document.made_by()
    assert run_cli("runs", "rm", RUN, "--store", str(tmp_path / "store")).returncode == 0
    assert not document.exists()
