"""The ``traceq`` command: parses arguments, calls the library, renders the frames it returns."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import click
import polars as pl
import typer
import typer.core

from traceq._version import __version__
from traceq.analysis.compare import compare as compare_runs
from traceq.analysis.report import run_report
from traceq.analysis.results import TOP_OPS, Comparison, RunReport
from traceq.errors import TraceqError
from traceq.ingest.executors import EXECUTORS
from traceq.ingest.ingest import ingest as ingest_files
from traceq.ingest.ingest import latest_run, pick_runs, run_id_of
from traceq.model.nesting import native_available as nesting_native
from traceq.query.engine import DEFAULT_TIMEOUT_S
from traceq.query.engine import sql as run_sql
from traceq.query.files import list_queries, source_dir
from traceq.readers.chrome.decoder import native_available as decoder_native
from traceq.render import Format, check_format, render
from traceq.render.frames import literal, visible
from traceq.render.html import write_html
from traceq.schema import markdown_reference
from traceq.store import STORE_ENV, Store, check_store, remove_run


class _Commands(typer.core.TyperGroup):
    """The commands: a :class:`TraceqError` from the library is one line on stderr and exit code 1 (in
    :func:`main` and wherever the app runs, such as typer's test runner)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TraceqError as e:
            _error(str(e))
            raise typer.Exit(1) from None


app = typer.Typer(
    name="traceq",
    help="Why did mixed precision (AMP) make training slower? Evidence from profiler traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=_Commands,
)

StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", envvar=STORE_ENV, help="Store directory (default: ./.traceq, or $TRACEQ_STORE)."),
]
FormatOpt = Annotated[Format, typer.Option("--format", help="Output format.")]
_PROGRESS_MIN_BYTES = 4 << 20


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Trace files, or directories of them.", show_default=False)],
    store: StoreOpt = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Run name (default: the file name). With several files or a directory: "
            "one multi-rank run of that name.",
        ),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Files read in parallel (default: all cores).")
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            "--executor",
            help="Where files are read: local (process pool) or ray (Ray tasks; "
            "the cluster at $RAY_ADDRESS, else a local Ray instance).",
        ),
    ] = "local",
    fmt: FormatOpt = Format.table,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Read trace files into the store (one run per file; with --name, one run of many ranks).

    Example: traceq ingest sample_traces/kineto_conformer_fp16_b4_2steps.json.gz --name amp
    Example: traceq ingest sample_traces/ddp/fp32 --name ddp --jobs 2
    """  # fmt: skip
    if executor not in EXECUTORS:
        raise typer.BadParameter(f"{executor!r}; choose one of {', '.join(EXECUTORS)}", param_hint="--executor")
    failed: list[str] = []

    def on_error(e: TraceqError) -> None:
        failed.append(str(e))
        _error(str(e))

    with _progress(quiet) as progress:
        result = ingest_files(
            paths, store=_store(store), name=name, progress=progress, on_error=on_error, jobs=jobs,
            executor=executor,  # type: ignore[arg-type]
        )  # fmt: skip
    if fmt is Format.table:
        multi = result["run_id"].drop_nulls().n_unique() < result["run_id"].drop_nulls().len()
        for row in result.filter(pl.col("status") == "skipped").iter_rows(named=True):
            typer.echo(visible(f"skipped {row['path']}: {row['summary']}"), err=True)
        for row in result.filter(pl.col("status").is_in(["ingested", "duplicate"])).iter_rows(named=True):
            verb = row["status"]
            rank = f" rank {row['rank']}" if multi and row["rank"] is not None else ""
            typer.echo(visible(f"{verb} {row['name']}{rank} ({row['run_id']}): {row['summary']}"))
            for w in json.loads(row["warnings"] or "[]"):
                typer.echo(visible(f"  warning: {w}"), err=True)
    else:
        render(result, fmt)
    if failed:
        raise typer.Exit(1)


runs_app = typer.Typer(cls=_Commands, no_args_is_help=False)
app.add_typer(runs_app, name="runs")


@runs_app.callback(invoke_without_command=True)
def runs(ctx: typer.Context, store: StoreOpt = None, fmt: FormatOpt = Format.table) -> None:
    """List the runs in the store (`traceq runs rm RUN` removes one).

    Example: traceq runs --format json
    """
    if ctx.invoked_subcommand is not None:
        return
    cat = _store(store).catalog()
    if fmt is Format.table:
        shown = ("run_id", "name", "n_ranks", "flavour", "profiler_version", "n_events", "n_steps", "ingested_at")
        cat = cat.select(shown)
    render(cat, fmt)


@runs_app.command("rm")
def runs_rm(
    ctx: typer.Context,
    run: Annotated[str, typer.Argument(help="Run id, unique run id prefix, or run name.", show_default=False)],
    store: StoreOpt = None,
) -> None:
    """Remove a run from the store (a damaged one too).

    Example: traceq runs rm r3f2a9c1d0b4e
    """
    stored = Store(store or ctx.parent.params.get("store") if ctx.parent else store)
    run_id = stored.resolve(run, damaged_ok=True)
    label = _named(stored, run_id)
    remove_run(stored, run_id)
    typer.echo(f"removed {visible(label)}")


@app.command()
def check(store: StoreOpt = None, fmt: FormatOpt = Format.table) -> None:
    """Check every stored run: its catalog row, its files' sizes and checksums, its Parquet footers.

    Exit code 1 if any run is damaged (each such run is named with its problem).

    Example: traceq check
    """
    stored = Store(store)
    problems = check_store(stored)
    if fmt is not Format.table or problems.height:
        render(problems, fmt)
    n_runs = len(stored.run_dirs())
    if problems.height:
        bad = problems["run_id"].n_unique()
        typer.echo(f"traceq: {bad} of {n_runs} runs in {visible(str(stored.root))} damaged", err=True)
        raise typer.Exit(1)
    typer.echo(f"traceq: {n_runs} runs in {visible(str(stored.root))}, all whole", err=True)


@app.command()
def sql(
    query: Annotated[str | None, typer.Argument(help="A SELECT statement.", show_default=False)] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the query from a .sql file.")] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, metavar="SECONDS", help="Stop the query after SECONDS (0: never).")
    ] = DEFAULT_TIMEOUT_S,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            "--memory-limit",
            metavar="SIZE",
            help="DuckDB's memory bound, e.g. 2GB or 500MB (default: half of the available memory, at most 4GB).",
            show_default=False,
        ),
    ] = None,
    store: StoreOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Run a read-only SQL query (DuckDB dialect) over every stored run.

    Tables: runs, events, steps, threads; see `traceq schema`.

    Stopped after --timeout seconds; beyond --memory-limit DuckDB spills to disk, or the query fails.

    Example: traceq sql "select kind, count(*) n, sum(dur_ns) d from events group by kind" --format json
    """
    if (query is None) == (file is None):
        raise TraceqError("give a query or --file, not both or neither")
    if file is not None:
        try:
            query = file.read_text(encoding="utf-8")
        except OSError as e:
            raise TraceqError(f"{file}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise TraceqError(f"{file}: not a text file (invalid UTF-8)") from None
    render(run_sql(query or "", _store(store), timeout=timeout, memory_limit=memory_limit), fmt)


@app.command()
def report(
    runs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Run id, run name, or a trace file (ingested on the fly); with --compare: [[BASE] NEW]. "
            "Default: the latest run (with --compare: the two latest).",
            show_default=False,
            metavar="RUN",
        ),
    ] = None,
    compare: Annotated[
        bool, typer.Option("--compare", help="Explain the step-time difference between BASE and NEW.")
    ] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as an HTML page (--format html prints it).")
    ] = None,
    fail_if_slower: Annotated[
        float | None,
        typer.Option("--fail-if-slower", help="With --compare: exit 3 if NEW is slower by more than PCT percent."),
    ] = None,
    all_ops: Annotated[
        bool, typer.Option("--all", help=f"JSON lists every op (default: the {TOP_OPS} with the most CPU time).")
    ] = False,
    store: StoreOpt = None,
    fmt: FormatOpt = Format.table,
) -> None:
    """Explain one run, or with --compare why NEW's step is slower or faster than BASE's.

    No RUN: the run ingested last. --compare alone: the two runs ingested last; --compare NEW: it and the one before.

    Example: traceq report --compare conformer_fp32_b64 conformer_fp16_b64 --html amp.html
    """
    runs = runs or []
    if len(runs) > (2 if compare else 1):
        raise TraceqError("give one RUN, or --compare [[BASE] NEW]" if not compare else "--compare takes BASE NEW")
    check_format(Comparison if compare else RunReport, fmt)
    if not compare and (html is not None or fail_if_slower is not None):
        raise TraceqError(f"{'--html' if html is not None else '--fail-if-slower'} needs --compare")
    stored = _store(store)
    if compare:
        named: list[str | None] = [None, None, *runs]
        base_id, new_id = pick_runs(stored, named[-2], named[-1])
        if len(runs) < 2:
            which = ", the two latest runs" if not runs else ""
            before = ", the run ingested before it," if len(runs) == 1 else ""
            _note(f"comparing BASE {_named(stored, base_id)}{before} with NEW {_named(stored, new_id)}{which}")
        result = compare_runs(base_id, new_id, stored)
        result.base.top_ops = result.new.top_ops = None if all_ops else TOP_OPS
        render(result, fmt)
        if html is not None:
            write_html(result, html)
        delta, window = result.step_time_delta_ms, result.base.summary.get("step_time_ms")
        if fail_if_slower is not None and delta is not None and window and delta / window * 100 > fail_if_slower:
            typer.echo(f"traceq: NEW is {delta / window:.1%} slower per step (limit {fail_if_slower}%)", err=True)
            raise typer.Exit(3)
        return
    if not runs:
        run_id = latest_run(stored)
        _note(f"explaining {_named(stored, run_id)}, the latest run")
    explained = run_report(run_id_of(runs[0], stored) if runs else run_id, stored)
    explained.top_ops = None if all_ops else TOP_OPS
    render(explained, fmt)


@app.command()
def queries(fmt: FormatOpt = Format.table) -> None:
    """List the metric queries in queries/ (run one with `traceq sql -f`).

    Example: traceq sql -f queries/gpu_busy.sql --format json
    """
    render(list_queries(), fmt)
    if fmt is Format.table:
        typer.echo(f"files: {source_dir()}")


@app.command()
def schema() -> None:
    """Print the canonical tables and columns (Markdown)."""
    typer.echo(markdown_reference(), nl=False)


@app.command()
def version() -> None:
    """Print traceq's version and whether its optional C parts were built."""
    def built(yes: bool) -> str:
        return "built" if yes else "not in use (Python path)"

    typer.echo(__version__)
    typer.echo(f"chrome decoder: {built(decoder_native())}; nesting: {built(nesting_native())}")


def _store(path: Path | None) -> Store:
    """The store, with a warning for each damaged run (left out of everything read)."""
    store = Store(path)
    for damage in store.damaged().values():
        typer.echo(f"traceq: warning: {visible(damage.message(store))}; left out", err=True)
    return store


class _progress:
    """A byte-level progress bar on stderr for large inputs (only on a terminal)."""

    def __init__(self, quiet: bool) -> None:
        self.enabled = not quiet and sys.stderr.isatty()
        self.bar = None

    def __enter__(self) -> Callable[[str, int], Callable[[int], None] | None]:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                console=Console(stderr=True, emoji=False),
                transient=True,
            )
            self.bar.start()
        return self.factory

    def factory(self, label: str, size: int) -> Callable[[int], None] | None:
        if self.bar is None or size < _PROGRESS_MIN_BYTES:
            return None
        return _Bar(self.bar, label, size)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


class _Bar:
    """One file's bar: advanced by bytes read, then relabelled with each later stage of its ingest."""

    def __init__(self, bar: Any, label: str, size: int) -> None:
        self.bar, self.label = bar, literal(label.removeprefix("reading "))  # a file name, inside rich markup
        self.task = bar.add_task(f"reading {self.label}", total=size)

    def __call__(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def stage(self, text: str) -> None:
        self.bar.update(self.task, description=f"{self.label}: {text}")


def _named(store: Store, run_id: str) -> str:
    """``name (run id)`` of a stored run."""
    cat = store.catalog()
    name = cat.filter(pl.col("run_id") == run_id)["name"].to_list()
    return f"{name[0]} ({run_id})" if name else run_id


def _note(message: str) -> None:
    """A line on stderr about what a command chose (stdout keeps only its output)."""
    typer.echo(f"traceq: {visible(message)}", err=True)


def _error(message: str) -> None:
    typer.echo(f"traceq: error: {visible(message)}", err=True)


def main() -> None:
    """Entry point: library errors become one line on stderr and exit code 1, never a traceback."""
    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except TraceqError as e:
        _error(str(e))
        sys.exit(1)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        _error("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        _error("interrupted; nothing partial was stored")
        sys.exit(130)
    except Exception as e:  # usage errors (typer's click) and anything unexpected
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
        if os.environ.get("TRACEQ_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e} (set TRACEQ_DEBUG=1 for details)")
        sys.exit(2)


if __name__ == "__main__":
    main()
