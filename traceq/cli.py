"""The ``traceq`` command: parses arguments, calls the library, renders the frames it returns.

Each command imports the library parts it uses when it runs (Polars, DuckDB and the analysis take
several times Python's own start-up to import), so ``--help`` and the light commands start at once."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import typer.core

from traceq._version import __version__
from traceq.errors import TraceqError, not_utf8, os_problem
from traceq.export import Target
from traceq.ingestion import EXECUTORS
from traceq.locations import STORE_ENV
from traceq.querying import DEFAULT_TIMEOUT_S
from traceq.render.formats import TOP_OPS, FrameFormat, ReportFormat
from traceq.render.text import literal, visible

if TYPE_CHECKING:
    from traceq.store import Store


class _Commands(typer.core.TyperGroup):
    """The commands: a :class:`TraceqError` from the library is one line on stderr and exit code 1 (in
    :func:`main` and wherever the app runs, such as typer's test runner)."""

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TraceqError as e:
            if _signalled:
                raise _Interrupted from None
            _error(str(e))
            raise typer.Exit(1) from None
        except BrokenPipeError:  # before click, which exits with code 1 on it
            _reader_gone()
            raise typer.Exit(0) from None
        except KeyboardInterrupt:  # not click's Abort, which prints a blank line first
            raise _Interrupted from None
        except OSError as e:  # the one place where the system's errors (a file the user cannot read) become a line
            _error(os_problem(e))
            raise typer.Exit(1) from None


def _reader_gone() -> None:
    """The reader of stdout has gone (`traceq report | head`): it has what it wanted, so the command ends
    quietly with code 0, as other tools do; what is left to write goes nowhere (the interpreter's last
    flush included)."""
    with suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM ended the command."""


class _Command(typer.core.TyperCommand):
    """A command whose text arguments are read as UTF-8 before it runs (whatever the locale's encoding,
    as Python decoded them): run names, patterns and queries are text, and an argument holding bytes that
    are not UTF-8 is refused naming it; an argument naming a file is a file, whatever its bytes."""

    def invoke(self, ctx: typer.Context) -> Any:
        for param in self.params:
            value = ctx.params.get(param.name or "")
            texts = list(value) if isinstance(value, (list, tuple)) else [value]
            if any(isinstance(t, str) and not_utf8(t) is not None for t in texts):
                read = [_utf8_argument(param, t) for t in texts]
                ctx.params[param.name or ""] = type(value)(read) if isinstance(value, (list, tuple)) else read[0]
        return super().invoke(ctx)


def _utf8_argument(param: Any, text: object) -> object:
    """An argument's text as UTF-8 (a file's name as it is); one that is not UTF-8 is refused naming it."""
    if not isinstance(text, str) or not_utf8(text) is None or os.path.lexists(text):
        return text
    try:
        return os.fsencode(text).decode("utf-8")  # the argument's bytes, as the shell passed them
    except UnicodeError:
        options = [o for o in param.opts if o.startswith("-")]
        label = options[0] if options else param.human_readable_name
        raise TraceqError(f"{label} {visible(text)!r}: not UTF-8 text (byte 0x{not_utf8(text):02x})") from None


app = typer.Typer(
    name="traceq",
    help="Why did mixed precision (AMP) make training slower? Evidence from profiler traces.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=_Commands,
)

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help=f"Store directory (default: ${STORE_ENV}, else the nearest .traceq store here or in a folder above, "
        "else traceq/store in the user's data folder).",
        show_default=False,
    ),
]
FrameFormatOpt = Annotated[FrameFormat, typer.Option("--format", help="Output format.")]
StepsFromOpt = Annotated[
    str | None,
    typer.Option(
        "--steps-from",
        metavar="REGEX",
        help="The host ranges (NVTX, record_function) whose names match REGEX are the steps, instead of the "
        "profiler's steps or the ranges traceq finds itself (a stored run is read again from its file).",
        show_default=False,
    ),
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0, metavar="SECONDS", help="Stop the query after SECONDS (0: never).")
]
MemoryLimitOpt = Annotated[
    str | None,
    typer.Option(
        "--memory-limit",
        metavar="SIZE",
        help="DuckDB's memory bound, e.g. 2GB or 500MB (default: half of the available memory, at most 4GB).",
        show_default=False,
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Replace an existing output file that traceq did not write (never a trace of a "
                 "stored run, a file in the store or a device)."),
]  # fmt: skip
_PROGRESS_MIN_BYTES = 4 << 20


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"traceq {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit."),
    ] = False,
) -> None:
    """Why did mixed precision (AMP) make training slower? Evidence from profiler traces."""


@app.command(cls=_Command)
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
    steps_from: StepsFromOpt = None,
    fmt: FrameFormatOpt = FrameFormat.table,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Read trace files into the store (one run per file; with --name, one run of many ranks).

    \b
    Example: traceq ingest sample_traces/paddlefmt_conformer_fp16_b64_2steps.json.gz --name paddle_amp
    Example: traceq ingest sample_traces/ddp/fp32 --name ddp --jobs 2
    """  # fmt: skip
    from traceq.analysis.replay.explain import estimate_memory, explained_report, store_estimate
    from traceq.ingestion.ingest import ingest as ingest_files
    from traceq.ingestion.metrics import WholeRunStep
    from traceq.render import render
    from traceq.render.documents import store_report_documents
    from traceq.render.ingested import ingest_lines

    if executor not in EXECUTORS:
        raise typer.BadParameter(f"{executor!r}; choose one of {', '.join(EXECUTORS)}", param_hint="--executor")
    if jobs is not None and executor != "local":
        raise TraceqError(f"--jobs is for --executor local (--executor {executor} runs one task per file)")
    failed: list[str] = []

    def on_error(e: TraceqError) -> None:
        failed.append(str(e))
        _error(str(e))

    target = _store(store, existing=False)
    step = WholeRunStep(store_estimate, estimate_memory)  # (as traceq.ingest's)
    with _progress(quiet) as progress:
        result = ingest_files(
            paths, store=target, name=name, progress=progress, on_error=on_error, jobs=jobs,
            executor=executor, steps_from=_pattern(steps_from), whole_run_step=step,
        )  # fmt: skip
    store_report_documents(target, result, explained_report)
    if fmt is FrameFormat.table:
        ingest_lines(result)
    else:
        render(result, fmt)
    if failed:
        raise typer.Exit(1)


runs_app = typer.Typer(cls=_Commands, no_args_is_help=False, rich_markup_mode=None)
app.add_typer(runs_app, name="runs")


@runs_app.callback(invoke_without_command=True)
def runs(ctx: typer.Context, store: StoreOpt = None, fmt: FrameFormatOpt = FrameFormat.table) -> None:
    """List the runs in the store (`traceq runs rm RUN` removes one, `traceq runs rename RUN NAME` renames it).

    \b
    Example: traceq runs --format json
    """
    if ctx.invoked_subcommand is not None:
        given = [o for o, v in (("--store", store), ("--format", fmt is not FrameFormat.table or None)) if v]
        if given:
            raise TraceqError(f"{given[0]} goes after `runs {ctx.invoked_subcommand}`, not before it")
        return
    from traceq.render import render

    stored = _store(store)
    if fmt is FrameFormat.table:  # the catalog's rows, read without Polars where the store can
        from traceq.render.cells import SHOWN_ROWS, table
        from traceq.schema import RUNS

        shown = ("run_id", "name", "n_ranks", "flavour", "profiler_version", "n_events", "n_steps", "ingested_at")
        numeric = {c.name: c.numeric for c in RUNS.columns}
        rows = [[row[c] for c in shown] for row in stored.catalog_rows()]
        table([(c, numeric.get(c, False)) for c in shown], rows, sys.stdout, shown_rows=SHOWN_ROWS)
        return
    render(stored.catalog(), fmt.value)


RunArg = Annotated[str, typer.Argument(help="Run id, unique run id prefix, or run name.", show_default=False)]


@runs_app.command("rm", cls=_Command)
def runs_rm(run: RunArg, store: StoreOpt = None) -> None:
    """Remove a run from the store (a damaged one too).

    \b
    Example: traceq runs rm kineto_conformer_fp16_b4_2steps
    """
    from traceq.store import remove_run

    stored = _store(store, warn=False)
    run_id = stored.resolve(run, damaged_ok=True)
    label = _named(stored, run_id)
    remove_run(stored, run_id)
    typer.echo(f"removed {visible(label)}")


@runs_app.command("rename", cls=_Command)
def runs_rename(
    run: RunArg,
    new_name: Annotated[str, typer.Argument(help="The run's new name.", show_default=False)],
    store: StoreOpt = None,
) -> None:
    """Give a run another name.

    \b
    Example: traceq runs rename kineto_conformer_fp16_b4_2steps amp_b4
    """
    from traceq.store import rename_run

    stored = _store(store)
    run_id = stored.resolve(run)
    label = _named(stored, run_id)
    rename_run(stored, run_id, new_name)
    typer.echo(f"renamed {visible(label)} to {visible(new_name)}")


@app.command(cls=_Command)
def check(store: StoreOpt = None, fmt: FrameFormatOpt = FrameFormat.table) -> None:
    """Check every stored run: its catalog row, its files' sizes and checksums, its Parquet footers.

    Exit code 1 if any run is damaged (each such run is named with its problem).

    \b
    Example: traceq check
    """
    from traceq.render import render
    from traceq.store import check_store

    stored = _store(store, warn=False)
    problems = check_store(stored)
    if fmt is not FrameFormat.table or problems.height:
        render(problems, fmt)
    n_runs = len(stored.run_dirs())
    if problems.height:
        bad = problems["run_id"].n_unique()
        typer.echo(f"traceq: {bad} of {n_runs} runs in {visible(str(stored.root))} damaged", err=True)
        raise typer.Exit(1)
    typer.echo(f"traceq: {n_runs} runs in {visible(str(stored.root))}, all whole", err=True)


@app.command(cls=_Command)
def sql(
    query: Annotated[str | None, typer.Argument(help="A SELECT statement.", show_default=False)] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the query from a .sql file.")] = None,
    run: Annotated[
        list[str] | None,
        typer.Option(
            "--run",
            metavar="RUN",
            show_default=False,
            help="Only this run (run id, unique prefix or name; repeat for more; default: every run).",
        ),
    ] = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    memory_limit: MemoryLimitOpt = None,
    store: StoreOpt = None,
    fmt: FrameFormatOpt = FrameFormat.table,
) -> None:
    """Run a read-only SQL query (DuckDB dialect) over the stored runs (--run: only those).

    Tables: runs, events, steps, threads, kernel_classes, op_stats, kernel_stats, summary_cells, sources
    (`traceq schema`), and every metric of `traceq queries` by its name (gpu_gaps, gpu_busy, op_summary,
    ...): only the metrics a query names are computed. Columns are documented in
    information_schema.columns (column_comment); a column name two joined tables share is given as
    table.column (`s.name`).

    Stopped after --timeout seconds; beyond --memory-limit DuckDB spills to disk, or the query fails.

    \b
    Example: traceq sql "select kind, count(*) n, sum(dur_ns) d from events group by kind" --format json
    Example: traceq sql "select step, idle_ns / 1e6 idle_ms from gpu_busy" --run kineto_conformer_fp16_b4_2steps
    """
    from traceq.querying.engine import sql as run_sql
    from traceq.querying.engine import sql_shown
    from traceq.querying.files import read_sql_file
    from traceq.querying.shown import Shown
    from traceq.render import render
    from traceq.render.cells import SHOWN_ROWS, table

    if (query is None) == (file is None):
        raise TraceqError("give a query or --file, not both or neither")
    if file is not None:
        query = read_sql_file(file)
    stored = _store(store)
    runs = list(dict.fromkeys(stored.resolve(r) for r in run)) if run else None
    if fmt is not FrameFormat.table:
        render(run_sql(query or "", stored, runs, timeout=timeout, memory_limit=memory_limit), fmt)
        return
    result = sql_shown(query or "", SHOWN_ROWS, stored, runs, timeout=timeout, memory_limit=memory_limit)
    if isinstance(result, Shown):  # fetched without a frame
        table(result.columns, result, sys.stdout, shown_rows=SHOWN_ROWS)
    else:
        render(result, fmt)


@app.command(cls=_Command)
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
        Path | None, typer.Option("--html", help="Also write the report as an HTML page (--format html prints it).")
    ] = None,
    fail_if_slower: Annotated[
        float | None,
        typer.Option(
            "--fail-if-slower",
            help="With --compare: exit 3 if NEW is slower by more than PCT percent (by the measured step "
            "times if given, else the estimate without the profiler, else the traced steps).",
        ),
    ] = None,
    base_step_ms: Annotated[
        float | None,
        typer.Option(
            "--base-step-ms",
            min=0,
            metavar="MS",
            help="With --compare: BASE's step time measured "
            "without the profiler (the verdict states the real difference).",
            show_default=False,
        ),
    ] = None,
    new_step_ms: Annotated[
        float | None,
        typer.Option(
            "--new-step-ms",
            min=0,
            metavar="MS",
            help="With --compare: NEW's step time measured without the profiler.",
            show_default=False,
        ),
    ] = None,
    what_if: Annotated[
        bool, typer.Option("--what-if", help="Replay the run with each cause removed: the step time each fix saves.")
    ] = False,
    unprofiled: Annotated[
        bool | None,
        typer.Option(
            "--unprofiled/--traced-only",
            help="Lead with the step time estimated without the profiler "
            "(with --compare: the verdict on it, unless measured times are given); the default wherever "
            "the replay can run. --traced-only: the traced numbers alone.",
            show_default=False,
        ),
    ] = None,
    steps_from: StepsFromOpt = None,
    all_ops: Annotated[
        bool, typer.Option("--all", help=f"List every op (default: the top {TOP_OPS} by CPU time).")
    ] = False,
    force: ForceOpt = False,
    store: StoreOpt = None,
    fmt: Annotated[ReportFormat, typer.Option("--format", help="Output format.")] = ReportFormat.table,
) -> None:
    """Explain one run, or with --compare why NEW's step is slower or faster than BASE's.

    No RUN: the run ingested last. --compare alone: the two runs ingested last; --compare NEW: it and the one before.

    \b
    Example: traceq report --compare kineto_conformer_fp32_b4_2steps kineto_conformer_fp16_b4_2steps --html amp.html
    """
    from traceq.ingestion.run_refs import latest_run

    runs = runs or []
    if len(runs) > (2 if compare else 1):
        raise TraceqError("give one RUN, or --compare [[BASE] NEW]" if not compare else "--compare takes BASE NEW")
    only_compare = {"--fail-if-slower": fail_if_slower, "--base-step-ms": base_step_ms,
                    "--new-step-ms": new_step_ms}  # fmt: skip
    given = [option for option, value in only_compare.items() if value is not None]
    if not compare and given:
        raise TraceqError(f"{given[0]} needs --compare")
    if (base_step_ms is None) != (new_step_ms is None):
        raise TraceqError("--base-step-ms and --new-step-ms go together")
    stored = _store(store, existing=not any(Path(ref).exists() for ref in runs))  # a file may start a store
    if html is not None:  # refused before the report is computed; written by write_html
        from traceq.render.html import html_output

        html_output(html, stored, force)
    pattern = _pattern(steps_from)
    top = None if all_ops else TOP_OPS
    page = html is not None or fmt is ReportFormat.html  # the steps' lanes are drawn by the HTML page only
    # a run's report with no option but --format table or json may be stored as printed (see below)
    plain = not (page or what_if or all_ops or unprofiled is not None or pattern is not None)
    if compare:
        from traceq.analysis.replay.explain import explained_comparison
        from traceq.ingestion.ingest import pick_refs
        from traceq.render import render
        from traceq.render.html import write_html

        named: list[str | None] = [None, None, *runs]
        refs = pick_refs(stored, named[-2], named[-1], pattern)
        if len(runs) < 2:
            which = ", the two latest runs" if not runs else ""
            before = ", the run ingested before it," if len(runs) == 1 else ""
            _note(f"comparing BASE {_named(stored, refs[0])}{before} with NEW {_named(stored, refs[1])}{which}")
        with _steps_chosen(stored, refs, pattern) as (source, (base_id, new_id)):
            result = explained_comparison(base_id, new_id, source, base_step_ms, new_step_ms, what_if, unprofiled, page)
        try:
            render(result, fmt, top=top)
        except BrokenPipeError:  # the reader has gone (`| head`): the page and the gate are still due
            _reader_gone()
        if html is not None and (replaced := write_html(result, html, stored, force, top)):
            _note(replaced)
        change = result.change()  # the gate judges what the verdict leads with
        if fail_if_slower is not None and change is not None and change[0] > fail_if_slower:
            typer.echo(f"traceq: NEW is {change[0]:,.1f}% slower per step, {change[1]} (limit {fail_if_slower:g}%)",
                       err=True)  # fmt: skip
            raise typer.Exit(3)
        return
    if not runs:
        run_id = latest_run(stored)
        _note(f"explaining {_named(stored, run_id)}, the latest run")
        runs = [run_id]
    if plain and fmt in (ReportFormat.table, ReportFormat.json) and _stored_report_shown(stored, runs[0], fmt):
        return
    from traceq.analysis.replay.explain import explained_report
    from traceq.render import render
    from traceq.render.html import write_html

    with _steps_chosen(stored, runs[:1], pattern) as (source, ids):
        explained = explained_report(ids[0], source, what_if, unprofiled, page)
    render(explained, fmt, top=top)
    if html is not None and (replaced := write_html(explained, html, stored, force, top)):
        _note(replaced)


def _stored_report_shown(store: Store, ref: str, fmt: ReportFormat) -> bool:
    """Show the report of the stored run ``ref`` names from its document, where ingest stored one as this
    traceq prints it (:mod:`traceq.render.report_document`: no Polars, no analysis); False where it did not
    (the report is computed)."""
    from traceq.ingestion.run_refs import stored_ids
    from traceq.render import report_document

    ids = stored_ids(store, [ref])
    found = report_document.stored(store, ids[0]) if ids else None
    if found is None:
        return False
    report_document.show(*found, fmt is ReportFormat.json, sys.stdout)
    return True


@contextlib.contextmanager
def _steps_chosen(store: Store, refs: list[str], pattern: str | None) -> Iterator[tuple[Store, list[str]]]:
    """The store and runs to report on; with --steps-from, said on stderr that they are not stored. Runs
    that are stored are found without loading the readers (a file to ingest needs them)."""
    from traceq.ingestion.run_refs import stored_ids

    ids = stored_ids(store, refs) if pattern is None else None
    if ids is not None:
        yield store, ids
        return
    from traceq.ingestion.ingest import runs_to_report

    with runs_to_report(store, refs, pattern) as chosen:
        if pattern is not None:
            _note(f"steps from --steps-from {pattern!r}: read again for this report, not stored "
                  "(traceq ingest --steps-from stores such a run)")  # fmt: skip
        yield chosen


@app.command(cls=_Command)
def query(
    name: Annotated[str, typer.Argument(help="A metric query's name (see `traceq queries`).", show_default=False)],
    run: Annotated[
        str | None,
        typer.Option(
            "--run", help="Only this run (run id, unique prefix or name; default: every run).", show_default=False
        ),
    ] = None,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    memory_limit: MemoryLimitOpt = None,
    store: StoreOpt = None,
    fmt: FrameFormatOpt = FrameFormat.table,
) -> None:
    """Run a metric query by name: the SQL files installed with traceq (`traceq queries` lists them).

    \b
    Example: traceq query gpu_busy --run kineto_conformer_fp16_b4_2steps --format json
    """
    from traceq.querying.engine import query as run_query
    from traceq.render import render

    render(run_query(name, _store(store), run, timeout=timeout, memory_limit=memory_limit), fmt)


@app.command(cls=_Command)
def queries(fmt: FrameFormatOpt = FrameFormat.table) -> None:
    """List the metric queries (run one with `traceq query NAME`).

    \b
    Example: traceq query gpu_busy --format json
    """
    from traceq.querying.files import QUERY_LIST_COLUMNS, list_queries, query_summaries, source_dir

    if fmt is not FrameFormat.table:
        from traceq.render import render

        render(list_queries(), fmt)
        return
    from traceq.render.cells import SHOWN_ROWS, table  # the rows without Polars, as `runs` shows them

    table([(c, False) for c in QUERY_LIST_COLUMNS], query_summaries(), sys.stdout, shown_rows=SHOWN_ROWS)
    typer.echo(f"files: {source_dir()}")


@app.command(cls=_Command)
def schema() -> None:
    """Print the canonical tables and columns (Markdown)."""
    from traceq.schema import markdown_reference

    typer.echo(markdown_reference(), nl=False)


@app.command(cls=_Command)
def version() -> None:
    """Print traceq's version and whether its optional C parts were built."""
    from traceq._utils.native import PARTS, load

    typer.echo(f"traceq {__version__}")  # as --version prints it
    built = (f"{part}: {'built' if load(module) else 'not in use (Python path)'}" for part, module in PARTS.items())
    typer.echo("; ".join(built))


@app.command(cls=_Command)
def export(
    runs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Run ids, names or trace files (ingested on the fly). Perfetto: one RUN (default: the latest), "
            "with --compare [[BASE] NEW]; SQLite: any number (default: every run).",
            show_default=False,
            metavar="RUN",
        ),
    ] = None,
    to: Annotated[
        tuple[str, Path] | None,
        typer.Option(
            "--to", metavar="FORMAT FILE", help="perfetto FILE (.json or .json.gz) or sqlite FILE.", show_default=False
        ),
    ] = None,
    compare: Annotated[
        bool, typer.Option("--compare", help="Perfetto: BASE and NEW in one file, aligned on their first step.")
    ] = False,
    force: ForceOpt = False,
    store: StoreOpt = None,
) -> None:
    """Export runs: a trace for Perfetto UI with traceq's analysis as tracks, or an SQLite file for Datasette.

    \b
    Example: traceq export --compare kineto_conformer_fp16_b4_2steps --to perfetto amp.json.gz
    Example: traceq export --to sqlite runs.db
    """
    from traceq.export import export as export_runs
    from traceq.ingestion.ingest import pick_runs, run_id_of
    from traceq.ingestion.run_refs import latest_run

    if to is None or to[0] not in {t.value for t in Target}:
        raise TraceqError("say what to write: --to perfetto FILE or --to sqlite FILE")
    target, path = Target(to[0]), to[1]
    stored, refs = _store(store), runs or []
    if compare:
        if len(refs) > 2:
            raise TraceqError("--compare takes BASE NEW")
        named: list[str | None] = [None, None, *refs]
        ids = list(pick_runs(stored, named[-2], named[-1]))
    elif target is Target.perfetto:
        if len(refs) > 1:
            raise TraceqError("a Perfetto export takes one RUN, or --compare BASE NEW")
        ids = [run_id_of(refs[0], stored) if refs else latest_run(stored)]
    else:
        ids = [run_id_of(ref, stored) for ref in refs]
    written = export_runs(stored, ids, target, path, compare_runs=compare, force=force)
    if written.replaced:
        _note(written.replaced)
    _note(f"wrote {path} ({', '.join(_named(stored, r) for r in ids) if ids else 'every run'})")


def _store(path: Path | None, *, existing: bool = True, warn: bool = True) -> Store:
    """The store ``--store`` names, else the default one (:func:`~traceq.store.default_store_path`). One
    named by ``--store`` or ``$TRACEQ_STORE`` must hold a store, unless the command may create it. Each
    damaged run is named in a warning (``warn``) and left out of everything read."""
    from traceq.store import Store

    named = path if path is not None else os.environ.get(STORE_ENV) or None
    store = Store.open(named) if named is not None and existing else Store(named)
    for damage in store.damaged().values() if warn else ():  # damaged runs are left out of everything read
        typer.echo(f"traceq: warning: {visible(damage.message(store))}; left out", err=True)
    return store


class _progress:
    """A byte-level progress bar on stderr for large inputs (only on a terminal; or on ``console``). Each
    file's bar is one line as wide as the terminal: a long file name is cut short with an ellipsis."""

    def __init__(self, quiet: bool, console: Any = None) -> None:
        self.enabled = not quiet and (console is not None or sys.stderr.isatty())
        self.console = console
        self.bar: Any = None

    def __enter__(self) -> Callable[[str, int], Callable[[int], None] | None]:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn
            from rich.table import Column

            self.bar = Progress(
                TextColumn("{task.description}", table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis")),
                BarColumn(bar_width=16),
                DownloadColumn(table_column=Column(no_wrap=True)),
                TransferSpeedColumn(table_column=Column(no_wrap=True)),
                console=self.console or Console(stderr=True, emoji=False),
                transient=True,
                expand=True,
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
    """One file's bar: advanced by bytes read, then relabelled with each later stage of its ingest (the stage
    first, so that a long file name cut short at the end of a narrow terminal never hides it)."""

    def __init__(self, bar: Any, label: str, size: int) -> None:
        self.bar, self.label = bar, literal(label.removeprefix("reading "))  # a file name, inside rich markup
        self.task = bar.add_task(f"reading {self.label}", total=size)

    def __call__(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def stage(self, text: str) -> None:
        self.bar.update(self.task, description=f"{literal(text)}: {self.label}")  # what it does first: names get cut


def _pattern(regex: str | None) -> str | None:
    """``--steps-from``, checked: a regular expression (Rust's syntax, as Polars matches it)."""
    if regex is None:
        return None
    import polars as pl

    try:
        pl.Series([""]).str.contains(regex)
    except pl.exceptions.ComputeError as e:
        raise TraceqError(f"--steps-from {regex!r}: not a regular expression ({str(e).splitlines()[0]})") from None
    return regex


def _named(store: Store, run_id: str) -> str:
    """``name (run id)`` of a stored run."""
    name = [row["name"] for row in store.catalog_rows() if row["run_id"] == run_id]
    return f"{name[0]} ({run_id})" if name else run_id


def _note(message: str) -> None:
    """A line on stderr about what a command chose (stdout keeps only its output)."""
    typer.echo(f"traceq: {visible(message)}", err=True)


def _error(message: str) -> None:
    typer.echo(f"traceq: error: {visible(message)}", err=True)


_signalled: list[int] = []


def _on_signal(signum: int, frame: object) -> None:
    """SIGINT and SIGTERM end the command as Ctrl-C does: the cleanup of every ``finally`` runs (temporary
    files and folders, a run being written), then one line "interrupted"."""
    _signalled.append(signum)
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: library errors become one line on stderr and exit code 1, never a traceback; Ctrl-C
    and SIGTERM end every command in one line ("interrupted"), exit code 130. Where a stopped query's
    connection is still closing (DuckDB 1 waits for the query's running tasks), the process ends with its
    code at once, its output flushed and its spill folders removed, instead of waiting at exit."""
    try:
        _run()
    except SystemExit as e:
        engine = sys.modules.get("traceq.querying.engine")  # (loaded only by commands that query)
        if engine is not None and engine.end_without_waiting():
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            for stream in (sys.stdout, sys.stderr):
                with suppress(OSError, ValueError):
                    stream.flush()
            os._exit(code)
        raise


def _run() -> None:
    import signal

    for stream in (sys.stdout, sys.stderr):  # names the terminal's encoding cannot show are shown replaced
        if callable(getattr(stream, "reconfigure", None)):
            stream.reconfigure(errors="replace")
    for signum in (signal.SIGINT, getattr(signal, "SIGTERM", None)):
        if signum is not None:
            signal.signal(signum, _on_signal)
    try:
        code = _app_for(sys.argv[1:])(standalone_mode=False, prog_name="traceq")  # also as `python -m traceq`
        sys.stdout.flush()  # a closed pipe is met here, not at the interpreter's exit
        sys.exit(code if isinstance(code, int) else 0)
    except BrokenPipeError:
        _reader_gone()
        sys.exit(0)
    except TraceqError as e:
        if _signalled:  # an error the interruption caused (a worker pool broken by the signal, say)
            _interrupted()
        _error(str(e))
        sys.exit(1)
    except typer.Exit as e:
        if _signalled and e.exit_code:  # (an ingest whose files failed as the signal broke its workers)
            _interrupted()
        sys.exit(e.exit_code)
    except (_Interrupted, typer.Abort, KeyboardInterrupt):
        _interrupted()
    except Exception as e:  # usage errors (typer's click) and anything unexpected
        if _signalled or "Interrupt" in type(e).__name__:  # DuckDB's InterruptException, a broken pool
            _interrupted()
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
        if os.environ.get("TRACEQ_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e} (set TRACEQ_DEBUG=1 for details)")
        sys.exit(2)


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command that ``args`` begin with (typer makes click's command of every command
    and option before it parses: 7 ms of each start); the whole app where they begin with no command's
    name (the commands' list, `--version`, a misspelt command's message, shell completion)."""
    import copy

    name = args[0] if args else ""
    named = typer.main.get_command_name
    commands = [c for c in app.registered_commands if (c.name or named(c.callback.__name__)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    lean = copy.copy(app)  # (a shallow copy: the app keeps its own lists)
    lean.registered_commands, lean.registered_groups = commands, groups
    return lean


def _interrupted() -> None:
    _error("interrupted; nothing partial was stored")
    sys.exit(130)


if __name__ == "__main__":
    main()
