"""Install traceq on the oldest and newest Python it supports and run what a new user runs first.

For each interpreter (default ``python3.10`` and ``python3.13``, each with the libraries pip picks for it:
DuckDB 1 on 3.10, which has no DuckDB 2): the tracked files copied to a temporary folder, the README's
install command there (a venv, ``pip install -e '.[test]'``), the README's first run (both bundled
samples ingested and compared), ``traceq sql`` of more rows than a table shows, and the tests of
``--tests`` not marked slow. An interpreter that is not installed is skipped with a line saying so (``--require``: an
error). CI runs the project's interpreter only; this catches what another one's libraries break.

The interpreters are checked at once, each in its own folder (the installs are one core's work each, and
each interpreter's tests leave a core idle while its longest test file runs); each one's lines are printed
together when it is done.

Usage: python scripts/supported_pythons.py [--python python3.10 ...] [--tests tests/cli ...] [--require]
Prints a line per step with its time; exit code 1 if a step fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ("kineto_conformer_fp32_b4_2steps.json.gz", "kineto_conformer_fp16_b4_2steps.json.gz")
#: pytest's options, as the README's test command gives them
PYTEST = ("-q", "-n", "auto", "--dist", "loadfile", "-m", "not slow")
#: The tests run on each interpreter (those not marked slow): the SQL layer's metrics and users' SQL, the
#: queries' plans, sessions under a memory limit, the commands end to end and their golden reports, the
#: comparisons of later traces and the data-safety tests (signals, spills), where library versions have
#: differed (DuckDB 1's Arrow reader, anti joins, joins with a one-sided ON, close after an interrupt and
#: RESET of the memory limit, as-of joins on a strict inequality; about a minute and a half on two cores)
TESTS = (
    "tests/querying/test_metrics.py",
    "tests/querying/test_search_calls.py",
    "tests/querying/test_idle_pieces.py",
    "tests/querying/test_idle_charges.py",
    "tests/querying/test_plans.py",
    "tests/querying/test_session_make.py",
    "tests/export/test_sqlite.py::test_metrics_made_under_a_small_memory_limit_are_the_same",
    "tests/querying/test_sql_names.py",
    "tests/cli/test_cli.py",
    "tests/cli/test_end_to_end.py",
    "tests/cli/test_golden_reports.py",
    "tests/analysis/replay/test_later_leases.py",
    "tests/reliability/test_data_safety.py",
)


def tracked_copy(dest: Path) -> None:
    """The tracked files of the checkout (no venv, no build output) under ``dest``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def step(label: str, argv: list[str], cwd: Path, env: dict[str, str] | None, lines: list[str]) -> bool:
    """Run ``argv``; add its line with its time to ``lines`` and, on failure, the end of its output (the
    versions step: its line)."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    output = done.stdout + done.stderr
    bad = done.returncode != 0 or "Traceback" in output or "internal error" in output
    shown = f": {done.stdout.strip()}" if label == "versions" and not bad else ""
    lines.append(f"  {'FAILED' if bad else 'ok':<6} {label} ({took:.1f} s){shown}")
    if bad:
        lines.extend("    " + line for line in output.strip().splitlines()[-25:])
    return not bad


def check(python: str, tests: list[str], lines: list[str]) -> bool:
    """The steps on ``python`` (its path), ``tests`` the tests run, each step's line added to ``lines``;
    whether all passed."""
    with tempfile.TemporaryDirectory(prefix="traceq-py-") as tmp:
        root = Path(tmp)
        tracked_copy(root)
        venv = root / ".venv" / "bin"
        # the tests' real traces where the checkout's are (beside it), not beside the copy
        shared = os.environ | {"TRACEQ_SHARED": os.environ.get("TRACEQ_SHARED", str(ROOT.parent / "shared"))}
        store = {"TRACEQ_STORE": str(root / "store"), "PATH": f"{venv}:/usr/bin:/bin", "HOME": str(root)}
        steps = [
            ("venv", [python, "-m", "venv", ".venv"], None),
            ("pip install -e '.[test]'", [str(venv / "pip"), "install", "-q", "-e", ".[test]"], None),
            *((f"traceq ingest {s}", [str(venv / "traceq"), "ingest", f"sample_traces/{s}"], store) for s in SAMPLES),
            ("traceq report --compare", [str(venv / "traceq"), "report", "--compare"], store),
            ("traceq sql (more rows than shown)", [str(venv / "traceq"), "sql", "select * from events"], store),
            ("versions", [str(venv / "python"), "-c", _VERSIONS], None),
            ("pytest", [str(venv / "python"), "-m", "pytest", *PYTEST, *tests], shared),
        ]
        for label, argv, env in steps:
            if not step(label, argv, root, env, lines):
                return False
    return True


def interpreter(name: str) -> str | None:
    """The path of a working ``name`` (``python3.10``): on PATH, else one of pyenv's installed versions (whose
    shim runs only where pyenv selects that version)."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = [shutil.which(name), *sorted(map(str, root.glob(f"versions/{name.removeprefix('python')}.*/bin/{name}")))]
    for path in filter(None, found):
        if subprocess.run([path, "-c", "pass"], capture_output=True).returncode == 0:
            return path
    return None


_VERSIONS = "import sys, duckdb, polars; print(sys.version.split()[0], duckdb.__version__, polars.__version__)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", nargs="+", default=["python3.10", "python3.13"])
    ap.add_argument("--tests", nargs="+", default=list(TESTS))
    ap.add_argument("--require", action="store_true", help="an interpreter not installed is an error")
    args = ap.parse_args()
    failed = []
    found = {name: interpreter(name) for name in args.python}
    for name in (n for n, python in found.items() if python is None):
        print(f"{name}: not installed, skipped", flush=True)
        if args.require:
            failed.append(name)
    checked = {name: python for name, python in found.items() if python is not None}
    print(f"checking {', '.join(checked) or 'no interpreter'} at once", flush=True)
    lines = {name: [f"{name} ({python}):"] for name, python in checked.items()}
    with ThreadPoolExecutor(max(len(checked), 1)) as pool:
        done = {name: pool.submit(check, python, args.tests, lines[name]) for name, python in checked.items()}
        for name, future in done.items():
            passed = future.result()
            print("\n".join(lines[name]), flush=True)
            if not passed:
                failed.append(name)
    if failed:
        sys.exit(f"failed on {', '.join(failed)}")


if __name__ == "__main__":
    main()
