"""The reports of the bundled sample traces, as the command prints them in Markdown, are the ones kept in
``tests/data/golden/``: a change meant to leave the output alone (a refactor of how causes are declared,
say) is checked against every title, evidence line, next step and what-if fix they print. A change meant
to alter them rewrites the files with ``TRACEQ_WRITE_GOLDEN=1`` and shows the difference in its diff.

(Markdown, not JSON: the JSON carries each run's source path and full-precision floats whose last digits
vary from one run of the same code to the next, as Polars adds in parallel; Markdown rounds them.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, Ingested, run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
BASE, NEW = "kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"
#: golden file -> the command's arguments (the store added)
REPORTS = {
    "report_fp16_b4.md": ("report", NEW),
    "compare_b4.md": ("report", "--compare", BASE, NEW),
    "compare_b4_what_if.md": ("report", "--compare", BASE, NEW, "--what-if"),
    "report_ddp_fp16.md": ("report", "ddp_fp16"),
}


@pytest.fixture(scope="module")
def store(ingested: Ingested, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = ingested.copy(SAMPLES / f"{BASE}.json.gz", SAMPLES / f"{NEW}.json.gz", to=tmp_path_factory.mktemp("g") / "s")
    assert run_cli("ingest", "--quiet", "--jobs", "1", "--name", "ddp_fp16", str(SAMPLES / "ddp" / "fp16"),
                   "--store", str(root)).returncode == 0  # fmt: skip
    return root


@pytest.mark.parametrize("name", sorted(REPORTS))
def test_a_sample_report_reads_as_kept(store: Path, name: str) -> None:
    result = run_cli(*REPORTS[name], "--format", "markdown", "--store", str(store))
    assert result.returncode == 0, result.stderr
    path = GOLDEN / name
    if os.environ.get("TRACEQ_WRITE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.stdout)
    assert result.stdout == path.read_text(), f"{name} changed (TRACEQ_WRITE_GOLDEN=1 rewrites it)"
