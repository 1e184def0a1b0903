"""The package's architecture, read from its imports: stages in order, no loops, a shallow graph.

Every ``import`` of a traceq module anywhere in a module (at the top, inside a function, under
``TYPE_CHECKING``) is an edge. The stages, by rank (a stage imports only stages of a lower rank, and
itself; two stages of one rank never import each other)::

    0  floor     _version, errors, schema, _utils/       (import no other stage)
    1  model     the model build: ids, nesting, links, steps, kernel classes
    2  readers   input formats -> canonical tables        store    the Parquet store
    3  querying  the SQL engine, the query files, the stored metrics' layout
    4  ingestion  files -> readers -> store (+ metrics)    analysis reports, comparisons, findings
    5  render    every result in every output format      export   runs as files for other tools
    6  facade    traceq/__init__.py, the Python API       cli      the traceq command

Readers use the model (they hand it their events), so the model sits below them; ingest stores the
metrics it computes with the query engine, so query sits below ingest.

The causes traceq names are declared once, in :data:`REGISTRY`: no other module spells a cause id out
(the SQL in ``queries/`` emits them; a word that is also a cause id but names something else is listed in
:data:`HOMONYMS` with its reason).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "traceq"

#: Each stage's rank: a module imports modules of lower-ranked stages and of its own stage only.
RANKS = {
    "floor": 0,
    "model": 1,
    "readers": 2,
    "store": 2,
    "querying": 3,
    "ingestion": 4,
    "analysis": 4,
    "render": 5,
    "export": 5,
    "facade": 6,
    "cli": 6,
}
_TOP = {
    "traceq": "facade",
    "traceq.__main__": "cli",
    "traceq.cli": "cli",
    "traceq.store": "store",
    "traceq._version": "floor",
    "traceq.errors": "floor",
    "traceq.schema": "floor",
    "traceq.api": "facade",
    "traceq.locations": "store",
}
MAX_TOP_MODULES = 9
#: The modules that import traceq modules inside functions, where they are used: the command (each
#: command loads what it runs, so ``--help`` and the light commands start at once) and the two packages
#: whose entry points it declares its options with (formats, export targets). Elsewhere imports are at
#: the top, where they show the architecture.
DEFERRING = {"traceq.cli", "traceq.render", "traceq.export"}
MAX_CHAIN = 8
#: The one module that spells cause ids out (every other module refers to its constants).
REGISTRY = "traceq.analysis.causes"
#: Words that are cause ids but name something else where they are written: word -> (modules, why).
HOMONYMS: dict[str, tuple[set[str], str]] = {
    "cast_overhead": (
        {"traceq.querying.stored", "traceq.analysis.evidence", "traceq.analysis.report", "traceq.render.json_form"},
        "the metric query queries/cast_overhead.sql, and the report's JSON headline key (calls, CPU and GPU ms of "
        "casts) named after it",
    ),
    "optimizer": (
        {"traceq.model.kernel_classes", "traceq.render.html"},
        "a kernel class (kernel_classes.kernel_class), and its colour on the HTML page",
    ),
    "communication": ({"traceq.model.categories"}, "a chrome trace event category"),
    "straggler": ({"traceq.analysis.ranks"}, "the column of the stragglers table: each step's slowest rank"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def at_top(module: str) -> bool:
    """Whether the module is a file directly in ``traceq/`` (not in a stage folder)."""
    return modules()[module].parent == PACKAGE


def stage(module: str) -> str:
    if at_top(module):
        return _TOP[module]
    folder = modules()[module].relative_to(PACKAGE).parts[0]
    return "floor" if folder == "_utils" else folder


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The traceq modules an import statement names (a ``from package import name`` names the submodule
    where there is one)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if modules()[module].name == "__init__.py" else module.split(".")[:-1]
            base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules() else base for a in node.names]
    found = []
    for name in names:
        while name and name not in modules():
            name = name.rpartition(".")[0]
        if name.startswith("traceq") and name != module:
            found.append(name)
    return found


@cache
def graph() -> dict[str, dict[str, int]]:
    """module -> {imported traceq module: line of the first import}."""
    out: dict[str, dict[str, int]] = {}
    for module, path in modules().items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in _imported(module, node):
                    edges.setdefault(name, node.lineno)
        out[module] = edges
    return out


def function_level_imports() -> list[str]:
    found = []
    for module, path in modules().items():
        if module in DEFERRING:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and _imported(module, node):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def cycles() -> list[list[str]]:
    """Every import loop, as the modules on it (Tarjan's strongly connected components)."""
    g, index, low, stack, on_stack, out = graph(), {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in g:
        if v not in index:
            visit(v)
    return out


def longest_chain(exclude: tuple[str, ...] = ()) -> list[str]:
    g, memo = graph(), {}

    def chain(v: str) -> list[str]:
        if v not in memo:
            memo[v] = [v, *max((chain(w) for w in g[v]), key=len, default=[])]
        return memo[v]

    return max((chain(v) for v in g if v not in exclude), key=len)


def test_no_import_loops() -> None:
    assert cycles() == []


def test_no_function_level_imports_of_traceq_modules() -> None:
    assert function_level_imports() == []


def test_the_command_and_the_package_import_no_third_party_library_at_start() -> None:
    """``import traceq.cli`` (every command, before it parses its arguments) and ``import traceq`` load
    neither Polars, DuckDB, PyArrow nor the readers: each is several times Python's start-up."""
    import subprocess
    import sys

    for module in ("traceq.cli", "traceq"):
        code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        loaded = set(run.stdout.split())
        assert not loaded & {"polars", "duckdb", "pyarrow", "traceq.readers", "traceq.analysis"}, module


def test_every_module_is_in_a_stage_folder_but_a_few_at_the_top() -> None:
    top = sorted(m for m in modules() if at_top(m))
    assert len(top) <= MAX_TOP_MODULES, top
    assert set(top) <= set(_TOP), f"a new module at the top: put it in its stage's folder ({top})"
    assert {stage(m) for m in modules()} <= set(RANKS)


def test_the_longest_import_chain_is_short() -> None:
    """``traceq.__main__`` (what ``python -m traceq`` runs: cli's main) is left out: nothing imports it;
    so is the facade, ``traceq``, which names the API's functions for type checkers only (its chain is
    ``traceq.api``'s plus one)."""
    chain = longest_chain(exclude=("traceq.__main__", "traceq"))
    assert len(chain) <= MAX_CHAIN, " -> ".join(chain)


def test_readers_never_import_ingest_query_analysis_or_render_and_analysis_never_ingests() -> None:
    """(Implied by the ranks below; spelled out because they are the rules a change breaks first.)"""
    for module, edges in graph().items():
        imported = {stage(m) for m in edges}
        if stage(module) == "readers":
            assert not imported & {"ingestion", "querying", "analysis", "render", "facade", "cli"}, module
        if stage(module) == "analysis":
            assert "ingestion" not in imported, module


def test_stages_import_only_lower_stages() -> None:
    wrong = []
    for module, edges in graph().items():
        for imported, line in edges.items():
            a, b = stage(module), stage(imported)
            if a != b and RANKS[b] >= RANKS[a]:
                wrong.append(f"{modules()[module].relative_to(ROOT)}:{line}: {a} imports {b} ({imported})")
    assert wrong == []


def test_every_package_is_installed() -> None:
    """A package left out of pyproject's list would be missing from wheels (editable installs hide it)."""
    listed = re.search(r"^packages = \[(.*)\]$", (ROOT / "pyproject.toml").read_text(), re.M)
    assert listed is not None
    packages = {m for m, p in modules().items() if p.name == "__init__.py"}
    assert packages <= set(re.findall(r'"([\w.]+)"', listed.group(1)))


def cause_id_literals() -> dict[str, dict[str, list[int]]]:
    """Every string literal in the package that is a cause id: id -> {module: lines} (the registry left out)."""
    from traceq.analysis.causes import CAUSES

    found: dict[str, dict[str, list[int]]] = {}
    for module, path in modules().items():
        if module == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CAUSES:
                found.setdefault(node.value, {}).setdefault(module, []).append(node.lineno)
    return found


def test_a_cause_id_is_written_in_one_module() -> None:
    """A cause is declared once, in :data:`REGISTRY`: other modules name it through the registry's constants
    (``HOST_SYNC.id``), so adding a cause is one entry there, its SQL and its test. A homonym is allowed
    where :data:`HOMONYMS` says, and every homonym listed is still written there."""
    found = cause_id_literals()
    stray = [
        f"{modules()[m].relative_to(ROOT)}:{line}: {cause!r}"
        for cause, where in found.items()
        for m, lines in where.items()
        if m not in HOMONYMS.get(cause, (set(), ""))[0]
        for line in lines
    ]
    assert stray == [], f"write these as the registry's constants ({REGISTRY}), or list a homonym"
    listed = {(cause, m) for cause, (where, _) in HOMONYMS.items() for m in where}
    assert listed <= {(cause, m) for cause, where in found.items() for m in where}, "a homonym no longer written"


#: Stages that read the model only: what a reader's input format was, or how it spells its events, is not
#: theirs to know (the readers turn formats into kinds and flags: ``kind``, ``has_timeline``).
FORMAT_BLIND = ("analysis", "render", "export")
#: The readers' formats and raw event names of one format, as a module would write them.
FORMAT_WORDS = ("paddle_summary", "chrome_json", "nsys_sqlite", "Command Buffer Full")


def format_words() -> list[str]:
    """Every string literal (f-strings' text included) of a :data:`FORMAT_BLIND` module that names a format
    word of :data:`FORMAT_WORDS`, as ``path:line: word``."""
    found = []
    for module, path in modules().items():
        if stage(module) not in FORMAT_BLIND:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {w}" for w in FORMAT_WORDS if w in node.value]
    return found


def test_analysis_rendering_and_export_name_no_reader_format() -> None:
    assert format_words() == []


#: Calls that cut rows to a count: a frame's, a lazy frame's or an expression's.
CUTS = ("head", "tail", "limit", "top_k", "bottom_k")
#: Rounding and literal row counts in the analysis that are analysis, not presentation, as written there
#: (module -> exact source text -> why).
ANALYTICAL = {
    "traceq.analysis.replay.whatif": {
        "round(keep or 0)": "a searching op's typical kernel count, a mean, made the whole number of launches kept",
    },
    "traceq.analysis.evidence": {
        'pl.col("input_shapes").drop_nulls().unique(maintain_order=True).head(3)': "an op's first three distinct "
        "input shapes are what its evidence gives as examples (strings, not rows of a table)",
    },
    "traceq.analysis.compare": {
        "text[:1]": "the first letter of a sentence, not rows",
        "[f for f in findings if (f.impact_ms or 0.0) * delta > 0][:3]": "the verdict's sentence names at most "
        "three parts that moved the step its way",
        "[f for f in findings if (f.impact_ms or 0.0) * delta < 0][:2]": "... and two that moved it the other way",
    },
}


def _literal(node: ast.expr | None, sign: int = 1) -> bool:
    """Whether ``node`` is a whole number written out, above 0 (``sign`` -1: below 0)."""
    if sign < 0:
        if not (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)):
            return False
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value > 0


def _count_cut(s: ast.Slice) -> bool:
    """Whether a slice keeps a number of rows written out: the first (``x[:30]``) or the last (``x[-5:]``)."""
    first = s.lower is None and _literal(s.upper)
    last = s.upper is None and _literal(s.lower, -1)
    return s.step is None and (first or last)


def presentation_in_analysis() -> dict[str, set[str]]:
    """Per analysis module, the source text of each ``round(...)`` call and each cut to a row count written
    out: ``.head(30)`` (or ``tail``, ``limit``, ``top_k``, ``bottom_k``), ``x[:50]``, ``x[-5:]`` (a slice that
    drops one end, ``x[1:]``, keeps no count)."""
    found: dict[str, set[str]] = {}
    for module, path in modules().items():
        if stage(module) != "analysis":
            continue
        source = path.read_text()
        for node in ast.walk(ast.parse(source)):
            hit = False
            if isinstance(node, ast.Call):
                f = node.func
                given = [*node.args, *(k.value for k in node.keywords)]
                hit = (isinstance(f, ast.Name) and f.id == "round") or (
                    isinstance(f, ast.Attribute) and f.attr in CUTS and any(_literal(a) for a in given)
                )
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
                hit = _count_cut(node.slice)
            if hit:
                found.setdefault(module, set()).add(ast.get_source_segment(source, node) or "")
    return found


def test_the_analysis_neither_rounds_nor_cuts_to_a_row_count() -> None:
    """Results carry full values and every row (``traceq.render`` rounds and cuts them as each format writes
    them): no ``round(`` and no cut to a literal row count under ``traceq/analysis/`` but what
    :data:`ANALYTICAL` lists with its reason; and everything it lists is still written there."""
    found = presentation_in_analysis()
    stray = {m: texts - ANALYTICAL.get(m, {}).keys() for m, texts in found.items()}
    assert {m: t for m, t in stray.items() if t} == {}, "round and cut in traceq/render/, or list it with a reason"
    listed = {(m, t) for m, texts in ANALYTICAL.items() for t in texts}
    assert listed <= {(m, t) for m, texts in found.items() for t in texts}, "an allowed text no longer written"
