"""The real ``traceq`` command end to end, in a subprocess: its exit codes, and errors as one line on
stderr, never a traceback. (The other command tests run it in-process.)"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import SAMPLES, run_process


def test_version_runs() -> None:
    done = run_process("version")
    assert done.returncode == 0 and "chrome decoder:" in done.stdout and done.stderr == ""


def test_bad_input_is_one_line_and_exit_code_1(tmp_path: Path) -> None:
    notes = tmp_path / "notes.json"
    notes.write_text("this is not json\n")
    done = run_process("ingest", "--store", str(tmp_path / "store"), str(notes))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and str(notes) in done.stderr and "Traceback" not in done.stderr


def test_a_usage_error_is_exit_code_2() -> None:
    done = run_process("report", "--fail-if-slower", "lots")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "internal error" not in done.stderr


def test_a_slower_run_fails_the_gate_with_exit_code_3(tmp_path: Path) -> None:
    """The sample FP16 run is about 4 % faster per step than the FP32 one: compared the other way round,
    NEW is slower, and a 1 % gate fails after printing the comparison."""
    fp32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    fp16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    done = run_process("report", "--compare", str(fp16), str(fp32), "--store", str(tmp_path / "s"),
                       "--format", "json", "--fail-if-slower", "1")  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["step_time_delta_ms"] > 0
    assert done.stderr.startswith("traceq: NEW is ") and "Traceback" not in done.stderr
