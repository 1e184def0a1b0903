"""Benchmark: chrome-trace ingest, traceq against HTA releases (and Perfetto if it runs), over 4 trace sizes.

Traces are built from a real one (HTA's V100 DDP ``df_index_resolver`` trace by default) by replicating
its steps in time (``replicate_trace.py``; 1 copy is the original file, more copies are written compact,
so their MB per event is lower). For each size, each tool loads the same file in a fresh
process: traceq ingests it into a new store (read, model, write Parquet); HTA builds its
``TraceAnalysis`` (parse into a DataFrame). Times exclude interpreter start and imports (each tool's
import time is printed after the table); peak memory is the process's VmHWM. The last table fits time
against events to show how cost grows, and says where each size's model was built (in memory, or on disk
from ``traceq.model.on_disk.MIN_EVENTS`` events on, so that memory stops growing).

HTA runs in the interpreter given by ``--hta-python``, which may be given more than once to compare
several HTA releases in one run: a venv with ``pip install holistictraceanalysis==0.5.0``, another with
``pip install traceinsight==0.6.1`` (HTA's current release; it still installs the ``hta`` package). Each
is labelled with the release found there (the distribution that provides ``hta``, read with
``importlib.metadata`` in that interpreter) and skipped, with a note, when ``hta`` is not installed there.

Usage: python benchmarks/chrome_ingest.py [--source TRACE] [--copies 1,2,5,10] [--work DIR]
       [--hta-python PYTHON [--hta-python PYTHON ...]] [--skip-hta-above MB] [--repeat N]
       [--no-python-path] [--perfetto-shell TRACE_PROCESSOR_SHELL]

With ``--repeat N`` every tool loads every size N times, traceq and each HTA alternating (the HTA
releases take turns going first after traceq), and the fastest run of each is shown; "pairs x" is the
median (and range) of that HTA's time over traceq's in each round's runs, which this machine's slow and
fast phases (20-30 %, sometimes more) move less than they move either tool's best. Each size has one
line per HTA release, traceq's columns on the first.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replicate_trace import replicate

from traceq.model import on_disk

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared/traces/hta/df_index_resolver/df_index_resolver.json.gz"

_PEAK = """
def _peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

def _cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
"""
_TRACEQ = (
    _PEAK
    + """
import json, sys, time
t0 = time.perf_counter()
from traceq import ingest  # the function itself: the package may name its API lazily
t1, c1 = time.perf_counter(), _cpu()
rows = ingest([sys.argv[1]], store=sys.argv[2], jobs=1)
t2, c2 = time.perf_counter(), _cpu()
assert rows["status"][0] == "ingested", rows
n = int(rows["events"][0])
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "cpu": c2 - c1, "peak": _peak(), "events": n}))
"""
)
_HTA = (
    _PEAK
    + """
import json, logging, os, sys, time
logging.disable(logging.CRITICAL)
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1, c1 = time.perf_counter(), _cpu()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2, c2 = time.perf_counter(), _cpu()
frame = next(iter(analysis.t.traces.values()))
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "cpu": c2 - c1, "peak": _peak(), "events": len(frame)}))
"""
)
#: Which release of HTA an interpreter has: the distribution that installs the ``hta`` package (HTA 0.5 is
#: ``holistictraceanalysis``, 0.6 ``traceinsight``), its version and pandas's; found without importing HTA.
_HTA_RELEASE = """
import importlib.metadata as md, importlib.util, json
if importlib.util.find_spec("hta") is None:
    raise SystemExit("no hta package installed there")
names = md.packages_distributions().get("hta") or ["hta"]
try:
    pandas = md.version("pandas")
except md.PackageNotFoundError:
    pandas = "-"
print(json.dumps({"dist": names[0], "version": md.version(names[0]), "pandas": pandas}))
"""
_PERFETTO = """
import json, sys, time
from perfetto.trace_processor import TraceProcessor
t0 = time.perf_counter()
tp = TraceProcessor(trace=sys.argv[1])
print(json.dumps({"load": time.perf_counter() - t0}))
"""
#: Perfetto's ``trace_processor_shell`` loading a trace and counting its slices, in a process of its own
#: under this one (so that the peak of the only child, ``ru_maxrss``, is its own): its own "Trace
#: loaded" time (reading, decompressing and parsing into its tables) and its peak memory.
_PERFETTO_SHELL = """
import json, re, resource, subprocess, sys, tempfile
with tempfile.NamedTemporaryFile("w", suffix=".sql") as q:
    q.write("select count(*) as slices from slice;\\n")
    q.flush()
    done = subprocess.run([sys.argv[1], "-q", q.name, sys.argv[2]], capture_output=True, text=True)
if done.returncode:
    sys.exit(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
loaded = re.search(r"Trace loaded: [\\d.]+ MB in ([\\d.]+)s", done.stderr)
if loaded is None:
    sys.exit("no 'Trace loaded' line in its output")
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
slices = int(re.findall(r"\\d+", done.stdout.strip().splitlines()[-1])[-1])
print(json.dumps({"load": float(loaded.group(1)), "peak": peak, "slices": slices}))
"""


@dataclass(frozen=True)
class Peer:
    """An HTA release to compare against: its label in the tables and the interpreter it runs in."""

    label: str
    python: str


def _peers(pythons: list[str]) -> list[Peer]:
    """The HTA releases in ``pythons``, labelled by version (a note for each one without HTA)."""
    peers: list[Peer] = []
    for python in dict.fromkeys(pythons):
        found = _child(python, _HTA_RELEASE)
        if isinstance(found, str):
            print(f"HTA at {python}: skipped ({found})")
            continue
        label = f"HTA {found['version']}"
        if any(p.label == label for p in peers):
            label += f" #{len(peers) + 1}"
        peers.append(Peer(label, python))
        print(f"{label}: {found['dist']} {found['version']}, pandas {found['pandas']} ({python})")
    return peers


def _child(python: str, code: str, *args: str, env: dict[str, str] | None = None) -> dict | str:
    proc = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if proc.returncode:
        lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
        return lines[-1] if lines else f"exit {proc.returncode}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _traceq_runs(path: Path, stores: Path, repeat: int, env: dict[str, str] | None = None) -> dict | str:
    """The fastest of ``repeat`` traceq ingests of ``path``, each into a new store under ``stores``."""
    return _best([_child(sys.executable, _TRACEQ, str(path), str(stores / str(i)), env=env) for i in range(repeat)])


def _best(results: list[dict | str]) -> dict | str:
    """The fastest of repeated runs (with its own peak memory), or the first failure."""
    ok = [r for r in results if isinstance(r, dict)]
    return min(ok, key=lambda r: r["load"]) if ok else results[0]


def _pair_ratios(ours: list[dict | str], peer: list[dict | str]) -> list[float]:
    """A peer's load time over traceq's in each round of runs where both ran."""
    pairs = zip(ours, peer, strict=False)
    return [h["load"] / o["load"] for o, h in pairs if isinstance(o, dict) and isinstance(h, dict)]


def _print_imports(imports: dict[str, list[float]]) -> None:
    """Each tool's import time: the median (and range) over all its runs, at every size."""
    done = {tool: times for tool, times in imports.items() if times}
    if done:
        print("\nimport s (median, range over all runs): " + "; ".join(
            f"{tool} {statistics.median(t):.2f} ({min(t):.2f}-{max(t):.2f})" for tool, t in done.items()
        ))  # fmt: skip


def _raw_mb(path: Path) -> float:
    n = 0
    with gzip.open(path, "rb") as f:
        while block := f.read(1 << 24):
            n += len(block)
    return n / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, default=DEFAULT)
    ap.add_argument("--copies", default="1,2,5,10")
    ap.add_argument("--work", type=Path, default=None, help="where the built traces are kept (reused)")
    ap.add_argument(
        "--hta-python",
        action="append",
        default=None,
        help="an interpreter with HTA installed (holistictraceanalysis or traceinsight); may be given more than once,"
        " one per HTA release (default: this interpreter)",
    )
    ap.add_argument("--skip-hta-above", type=float, default=float("inf"), help="raw MB above which HTA is skipped")
    ap.add_argument("--repeat", type=int, default=1, help="runs per tool and size; the fastest is shown")
    ap.add_argument(
        "--no-python-path",
        dest="python_path",
        action="store_false",
        help="skip the extra traceq run with its C parts off (TRACEQ_NATIVE=0)",
    )
    ap.add_argument(
        "--perfetto-shell",
        default=None,
        help="Perfetto's trace_processor_shell binary: loads every size too, alternating with the others",
    )
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="traceq-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    hta_pythons = a.hta_python or [sys.executable]
    peers = _peers(hta_pythons)
    if a.perfetto_shell is None:
        perfetto = _child(hta_pythons[0], _PERFETTO, str(a.source))
        if isinstance(perfetto, str) and "CalledProcessError" in perfetto:
            perfetto = "its package downloads the trace_processor binary at first use, and that download failed"
        ran = f"loaded the 1-copy trace in {perfetto['load']:.2f} s" if isinstance(perfetto, dict) else None
        print(f"Perfetto trace_processor: {ran or 'not runnable here: ' + str(perfetto)}")
    else:
        print(f"Perfetto trace_processor: {a.perfetto_shell} (its 'Trace loaded' time; peak: its ru_maxrss)")
    rows = []
    imports: dict[str, list[float]] = {"traceq": [], **{p.label: [] for p in peers}}
    for k in (int(x) for x in a.copies.split(",")):
        path = a.source if k == 1 else work / f"{a.source.name.split('.')[0]}_x{k}.json.gz"
        if not path.exists():
            replicate(a.source, path, k)
        mb = _raw_mb(path)
        with tempfile.TemporaryDirectory() as tmp:
            hta_dir = Path(tmp) / "hta"
            hta_dir.mkdir()
            (hta_dir / path.name).symlink_to(path.resolve())

            ours_runs: list[dict | str] = []
            peer_runs: dict[Peer, list[dict | str]] = {p: [] for p in peers}
            perfetto_runs: list[dict | str] = []
            for i in range(a.repeat):  # alternating, so that each round shares the machine's phase
                ours_runs.append(_child(sys.executable, _TRACEQ, str(path), str(Path(tmp) / "c" / str(i))))
                if peers and mb <= a.skip_hta_above:
                    for p in peers[i % len(peers) :] + peers[: i % len(peers)]:  # each release goes first in turn
                        peer_runs[p].append(_child(p.python, _HTA, str(hta_dir)))
                if a.perfetto_shell is not None:
                    perfetto_runs.append(_child(sys.executable, _PERFETTO_SHELL, a.perfetto_shell, str(path)))
            for tool, runs in (("traceq", ours_runs), *((p.label, peer_runs[p]) for p in peers)):
                imports[tool] += [r["import"] for r in runs if isinstance(r, dict)]
            ours = _best(ours_runs)
            if perfetto_runs:
                _print_perfetto(k, mb, ours, _best(perfetto_runs), _pair_ratios(ours_runs, perfetto_runs))
            python_path = "-"
            if a.python_path:
                python_path = _traceq_runs(path, Path(tmp) / "py", a.repeat, {"TRACEQ_NATIVE": "0"})
        rows.append((k, mb, ours))
        lines = [
            (p.label, _best(peer_runs[p]) if peer_runs[p] else "skipped (size)", _pair_ratios(ours_runs, peer_runs[p]))
            for p in peers
        ] or [("-", "no HTA to compare with", [])]
        width = max(len("HTA"), *(len(label) for label, _, _ in lines)) + 2
        for j, (label, hta, pairs) in enumerate(lines):
            _print_row(k, mb, ours, python_path, label, hta, pairs, width, again=j > 0)
    _print_imports(imports)
    _print_fit(rows)


#: The width of traceq's columns in a size's line (copies to py s), left blank on its further HTA lines.
_OURS_WIDTH = 6 + 9 + 11 + 10 + 7 + 7 + 9 + 9 + 7


def _print_row(
    k: int,
    mb: float,
    ours: dict | str,
    python_path: dict | str,
    label: str,
    hta: dict | str,
    pairs: list[float],
    width: int,
    again: bool = False,
) -> None:
    """A size's line for one HTA release; ``again``: traceq's columns were on the size's first line."""
    if len(_print_row.__dict__) == 0:
        _print_row.__dict__["done"] = True
        print("(py s: the same traceq with its C parts off, TRACEQ_NATIVE=0; cpu s: user + system time of all the")
        print(" process's threads during the load; MB/cpu-s: raw MB per CPU second, the throughput of one core;")
        print(" speed x: HTA's time over traceq's (fastest runs); memory x: traceq's peak over HTA's)")
        print(f"\n{'copies':>6}{'raw MB':>9}{'events':>11}{'traceq s':>10}{'MB/s':>7}{'cpu s':>7}{'MB/cpu-s':>9}"
              f"{'peak MB':>9}{'py s':>7}{'HTA':>{width}}{'s':>8}{'MB/s':>7}{'cpu s':>7}{'peak MB':>9}{'speed x':>9}"
              f"{'memory x':>10}  pairs x (range)")  # fmt: skip
    if isinstance(ours, str):
        if not again:
            print(f"{k:>6}{mb:>9.1f}  traceq failed: {ours}")
        return
    if again:
        line = " " * _OURS_WIDTH
    else:
        py = f"{python_path['load']:>7.2f}" if isinstance(python_path, dict) else f"{'-':>7}"
        line = (f"{k:>6}{mb:>9.1f}{ours['events']:>11,}{ours['load']:>10.2f}{mb / ours['load']:>7.1f}"
                f"{ours['cpu']:>7.2f}{mb / ours['cpu']:>9.1f}{ours['peak'] / 1e6:>9.0f}{py}")  # fmt: skip
    line += f"{label:>{width}}"
    if isinstance(hta, dict):
        line += (f"{hta['load']:>8.2f}{mb / hta['load']:>7.1f}{hta['cpu']:>7.2f}{hta['peak'] / 1e6:>9.0f}"
                 f"{hta['load'] / ours['load']:>9.2f}{ours['peak'] / hta['peak']:>10.2f}")  # fmt: skip
        if pairs:
            line += f"  {statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
    else:
        line += f"  {hta}"
    print(line, flush=True)


def _print_perfetto(k: int, mb: float, ours: dict | str, perfetto: dict | str, pairs: list[float]) -> None:
    """Perfetto's line for a size (before the size's traceq and HTA line)."""
    if isinstance(perfetto, str) or isinstance(ours, str):
        print(f"{k:>6}{mb:>9.1f}  Perfetto: {perfetto if isinstance(perfetto, str) else '-'}")
        return
    speed, memory = perfetto["load"] / ours["load"], ours["peak"] / perfetto["peak"]
    line = (f"{k:>6}{mb:>9.1f}  Perfetto {perfetto['load']:.2f} s ({mb / perfetto['load']:.1f} MB/s), "
            f"{perfetto['peak'] / 1e6:.0f} MB, {perfetto['slices']:,} slices: traceq {speed:.2f}x its speed, "
            f"{memory:.2f}x its memory")  # fmt: skip
    if pairs:
        line += f"; pairs {statistics.median(pairs):.2f} ({min(pairs):.2f}-{max(pairs):.2f})"
    print(line, flush=True)


def _print_fit(rows: list[tuple[int, float, dict | str]]) -> None:
    ok = [(r[2]["events"], r[2]["load"], r[2]["peak"]) for r in rows if isinstance(r[2], dict)]
    if len(ok) < 2:
        return
    n = len(ok)
    mx, my = sum(e for e, _, _ in ok) / n, sum(t for _, t, _ in ok) / n
    slope = sum((e - mx) * (t - my) for e, t, _ in ok) / sum((e - mx) ** 2 for e, _, _ in ok)
    icpt = my - slope * mx
    print(f"\ntraceq time = {icpt:.2f} s + {slope * 1e6:.2f} s per million events (least squares over {n} sizes)")
    print(f"{'events':>11}{'s':>8}{'fit s':>8}{'us/event':>10}{'peak MB':>9}  model built")
    for e, t, p in ok:
        where = "on disk" if on_disk.builds_on_disk(e) else "in memory"
        print(f"{e:>11,}{t:>8.2f}{icpt + slope * e:>8.2f}{t / e * 1e6:>10.2f}{p / 1e6:>9.0f}  {where}")


if __name__ == "__main__":
    main()
