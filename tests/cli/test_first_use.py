"""What a first use of the command meets: a directory's runs stored in the order of its files, what is
skipped said so, a closed pipe ending quietly, and the notes a CPU-only run gets."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import traceq
from tests.conftest import SAMPLES, run_cli, shared

CPU_ONLY = SAMPLES / "paddle331_cpu_fp32_noshapes.paddle_trace.json.gz"


def test_a_directorys_runs_are_stored_in_the_order_of_their_files(tmp_path: Path) -> None:
    """The first file (by name) is the largest, so its worker ends last; the runs still follow the names,
    and so do "the two latest runs"."""
    folder = tmp_path / "job"
    folder.mkdir()
    big, small = shared("kineto/conformer_fp16_b64.json.gz"), SAMPLES / "hta_triton_example.json.gz"
    assert big.stat().st_size > 100 * small.stat().st_size
    shutil.copy(big, folder / "a_big.json.gz")
    shutil.copy(small, folder / "b_small.json.gz")
    store = tmp_path / "store"
    done = run_cli("ingest", str(folder), "--store", str(store), "--jobs", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    names = sorted(p.name.removesuffix(".json.gz") for p in folder.iterdir())
    assert traceq.runs(store).sort("ingested_at")["name"].to_list() == names
    done = run_cli("report", "--compare", "--store", str(store), "--format", "json")
    assert f"BASE {names[0]}" in done.stderr and f"NEW {names[1]}" in done.stderr


def test_every_file_that_is_not_a_trace_is_named_as_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    shutil.copy(SAMPLES / "hta_triton_example.json.gz", folder / "trace.json.gz")
    (folder / "empty.json").write_bytes(b"")
    (folder / "plain.gz").write_text("not compressed at all\n")
    (folder / "notes.txt").write_text("lr 1e-3, batch 4\n")
    (folder / "README").write_text("not trace-like: left out silently\n")
    with gzip.open(folder / "trace.json.gz") as f:
        assert "traceEvents" in json.load(f)  # the one trace
    done = run_cli("ingest", str(folder), "--store", str(tmp_path / "store"), "--quiet")
    assert done.returncode == 0, done.stderr
    skipped = sorted(line.split(":")[0] for line in done.stderr.splitlines() if line.startswith("skipped "))
    assert skipped == [f"skipped {folder / n}" for n in ("empty.json", "notes.txt", "plain.gz")]
    assert "README" not in done.stderr


def test_a_directory_of_no_traces_names_what_it_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "empty.json").write_bytes(b"")
    (folder / "notes.txt").write_text("lr 1e-3\n")
    done = run_cli("ingest", str(folder), "--store", str(tmp_path / "store"))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "holds no trace files" in line and "empty.json: empty file" in line and "notes.txt" in line


def _closed_pipe(*args: str) -> subprocess.CompletedProcess:
    """The command run with its stdout a pipe whose reader has gone (as `| head` does once it has read
    enough): the read end is closed before the command writes anything."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "traceq", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=600)  # fmt: skip
    finally:
        os.close(write)
    return proc


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    store = tmp_path / "store"
    traceq.ingest(CPU_ONLY, store=store)
    for args in (("report",), ("report", "--format", "json"), ("runs",), ("sql", "select * from events")):
        proc = _closed_pipe(*args, "--store", str(store))
        stderr = [line for line in proc.stderr.splitlines() if not line.startswith("traceq: explaining")]
        assert (proc.returncode, stderr) == (0, []), (args, proc.stderr)


def test_a_gate_in_a_closed_pipe_still_fails(tmp_path: Path) -> None:
    """`report --compare ... --fail-if-slower 1 | head`: the reader's leaving ends the output, not the gate
    (the sample FP16 run is slower than FP32 without the profiler, as the gate's test in test_end_to_end
    shows with the output read)."""
    fp32 = SAMPLES / "kineto_conformer_fp32_b4_2steps.json.gz"
    fp16 = SAMPLES / "kineto_conformer_fp16_b4_2steps.json.gz"
    proc = _closed_pipe("report", "--compare", str(fp32), str(fp16), "--store", str(tmp_path / "s"),
                        "--fail-if-slower", "1")  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("traceq: NEW is ")


def test_a_cpu_only_run_gets_no_launch_bound_note(tmp_path: Path) -> None:
    with gzip.open(CPU_ONLY) as f:
        events = json.load(f)["traceEvents"]
    gpu_cats = {"Kernel", "Memcpy", "Memset", "kernel", "gpu_memcpy", "gpu_memset"}
    assert not any(e.get("cat") in gpu_cats for e in events)  # no GPU work in the file
    report = traceq.run_report(str(CPU_ONLY), store=tmp_path / "store")
    assert report.summary.steps == sum(e.get("cat") == "ProfileStep" for e in events)
    assert any("No GPU work" in n for n in report.notes)
    assert not any("a launch-bound run" in n for n in report.notes), report.notes


def _help_examples() -> list[list[str]]:
    """Every ``Example:`` line of every command's --help, as arguments (read from the help text shown)."""
    import shlex

    commands = [[c] for c in ("ingest", "runs", "check", "sql", "report", "query", "queries", "export", "version")]
    commands += [["runs", "rm"], ["runs", "rename"]]
    examples = []
    for command in commands:
        text = run_cli(*command, "--help").stdout
        examples += [shlex.split(line.split("Example:", 1)[1])[1:] for line in text.splitlines() if "Example:" in line]
    assert len(examples) >= 10
    return examples


def test_every_help_example_runs_after_the_quick_start(tmp_path: Path) -> None:
    """Each example on a store of the README's quick start (the two samples, FP32 first), run where the
    samples are at ``sample_traces/``: every run it names exists, every file it reads is there."""
    quick = tmp_path / "quick"
    for trace in ("kineto_conformer_fp32_b4_2steps", "kineto_conformer_fp16_b4_2steps"):
        traceq.ingest(SAMPLES / f"{trace}.json.gz", store=quick, jobs=1)
    for k, args in enumerate(_help_examples()):
        work = tmp_path / f"example{k}"
        work.mkdir()
        (work / "sample_traces").symlink_to(SAMPLES)
        shutil.copytree(quick, work / "store")
        done = run_cli(*args, env={"TRACEQ_STORE": str(work / "store")}, cwd=work)
        assert done.returncode == 0, (args, done.stderr)


def test_version_and_the_version_option_say_the_same(tmp_path: Path) -> None:
    from importlib.metadata import version

    assert run_cli("--version").stdout.splitlines() == [f"traceq {version('traceq')}"]
    assert run_cli("version").stdout.splitlines()[0] == f"traceq {version('traceq')}"
