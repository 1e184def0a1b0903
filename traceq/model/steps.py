"""Steps: which events are steps, the steps table, the rule that found them, and each event's step.

Profiler steps (``ProfilerStep#N``) are steps where a trace has them. Without them, the step windows are
a user's own repeated host ranges named like steps (NVTX or ``record_function`` ranges such as
``train_step 7``, ``iteration 12``, ``step``, ``Batch 3``), or a pattern given with ``--steps-from``;
else the stretches between consecutive optimizer steps (``Optimizer.step#Adam.step``). What found them is
said in words by :func:`step_rule` and recorded in the catalog.
"""

from __future__ import annotations

import re
from itertools import pairwise

import polars as pl

from traceq.model.placing import nulls
from traceq.model.step_names import STEP_NAME

#: Names of host ranges that may be a user's steps or optimizer steps: kept (with their names) while the
#: model is built, so the steps can be chosen among them (:func:`find_steps`). Broad on purpose.
STEP_CANDIDATE = r"(?i)step|iter|batch|optimi[sz]"
#: A user's step range: a word for a step (``step``, ``iteration``/``iter``, ``batch``), perhaps after a
#: prefix (``train_step``, ``training step``), then perhaps a counter (``train_step 7``, ``iter_12``).
_USER_STEP = re.compile(
    r"(?i)^(?P<family>(?:[A-Za-z][\w ./-]*?[ _.:/-])?(?:step|iteration|iter|batch))[ _#:-]*(?P<n>\d+)?$"
)
#: An optimizer step range: PyTorch's ``Optimizer.step#Adam.step``, Paddle's ``Optimization`` ranges.
_OPTIMIZER_STEP = re.compile(r"(?i)^optimizer\.step#|^optimization( step)?$")
#: The steps table's name for the window between two optimizer steps.
AFTER_OPTIMIZER = "after "
#: The steps table's name for a capture's one window when nothing in it marks steps.
WHOLE_CAPTURE = "(whole capture)"


def step_number(name: pl.Expr) -> pl.Expr:
    """The N of a step name, null for other names."""
    return name.str.extract(STEP_NAME, 1).cast(pl.Int32)


def is_step_candidate(kind: pl.Expr, name: pl.Expr, steps_from: str | None = None) -> pl.Expr:
    """Whether an event may be a step: a profiler step, or a host range whose name may be a user's step or
    an optimizer step (or matches ``steps_from``)."""
    pattern = STEP_CANDIDATE if steps_from is None else f"{STEP_CANDIDATE}|{steps_from}"
    return (kind == "step") | (kind.is_in(["op", "annotation", "other"]) & name.str.contains(pattern))


def steps_table(events: pl.DataFrame) -> pl.DataFrame:
    """One row per ``step`` event (a profiler step), ordered by start."""
    return (
        events.filter(pl.col("kind") == "step")
        .select(
            step_number(pl.col("name")).alias("step"),
            "name",
            "ts_ns",
            "dur_ns",
            "event_id",
        )
        .sort("ts_ns")
    )


def find_steps(events: pl.DataFrame, steps_from: str | None = None) -> pl.DataFrame:
    """The steps table of a trace from its step candidates (``kind``, ``name``, ``ts_ns``, ``dur_ns``,
    ``pid``, ``tid``, ``event_id`` of the events :func:`is_step_candidate` keeps; other rows' names null):
    the ranges matching ``steps_from`` where given; else the profiler steps; else a user's repeated step
    ranges; else the windows between optimizer steps; else none."""
    named = events.filter(pl.col("name").is_not_null()).filter(  # (few rows keep their names)
        (pl.col("dur_ns") > 0) & is_step_candidate(pl.col("kind"), pl.col("name"), steps_from)
    )
    if steps_from is not None:
        chosen = named.filter((pl.col("kind") != "step") & pl.col("name").str.contains(steps_from))
        return _numbered(_one_thread(chosen))
    profiler = steps_table(named)
    if not profiler.is_empty():
        return profiler
    user = _user_steps(named.filter(pl.col("kind") != "step"))
    if not user.is_empty():
        return user
    return _between_optimizer_steps(named.filter(pl.col("kind") != "step"))


def as_step_kind(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``events`` with the ranges :func:`find_steps` chose as steps (a user's ``train_step 7`` ranges, or
    those ``--steps-from`` names) made of kind ``step``: they are the step windows, not ops, so no op
    nests under one as its top-level op and no op table lists them. Matched on name, start and length,
    among the named events only (the model keeps names on step candidates alone)."""
    if steps.is_empty() or "name" not in events.columns:
        return events
    rows = _made_steps(events.select("kind", "name", "ts_ns", "dur_ns").with_row_index("_row"), steps)
    if rows.is_empty():
        return events
    kind = events.get_column("kind").cast(pl.String).clone().scatter(rows.get_column("_row"), "step")
    return events.with_columns(kind.cast(events.schema["kind"]))


def kinds_made_steps(events: pl.DataFrame, steps: pl.DataFrame) -> dict[str, int]:
    """How many of ``events`` (``kind``, ``name``, ``ts_ns``, ``dur_ns``; other rows' names null) of each
    kind :func:`as_step_kind` makes steps: what the counts of the events as read become (the catalog's
    events per kind)."""
    if steps.is_empty():
        return {}
    return dict(_made_steps(events, steps).group_by("kind").len().iter_rows())


def _made_steps(events: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``events`` that are the ranges ``steps`` chose (no profiler steps): matched on name,
    start and length."""
    key = pl.concat_str([pl.col("name"), pl.col("ts_ns").cast(pl.String), pl.col("dur_ns").cast(pl.String)],
                        separator="\x1f")  # fmt: skip
    chosen = steps.select(key.alias("k")).get_column("k")
    return events.filter(pl.col("name").is_not_null() & (pl.col("kind") != "step")).filter(key.is_in(chosen.implode()))


def _user_steps(ranges: pl.DataFrame) -> pl.DataFrame:
    """The family of ranges named like steps (``train_step 1``, ``train_step 2``, ...) that repeats at least
    twice on one thread without overlapping, the one covering the most time where several do."""
    if ranges.is_empty():
        return _EMPTY
    families = ranges.with_columns(
        pl.col("name").map_elements(_family, return_dtype=pl.String).alias("_family")
    ).filter(pl.col("_family").is_not_null())
    best, best_ns = _EMPTY, 0
    for _, group in families.group_by("_family"):
        steps = _one_thread(group)
        if steps.height >= 2 and _disjoint(steps) and (total := int(steps["dur_ns"].sum())) > best_ns:
            best, best_ns = steps, total
    return _numbered(best) if best.height else _EMPTY


def _family(name: str) -> str | None:
    """The family of a step-like range name (``train_step 12`` -> ``train_step``), None for other names."""
    m = _USER_STEP.match(name.strip())
    return m.group("family").strip().lower() if m and not re.match(STEP_NAME, name) else None


def _one_thread(ranges: pl.DataFrame) -> pl.DataFrame:
    """The ranges of the thread that has the most of them, in time order."""
    if ranges.is_empty():
        return ranges
    top = ranges.group_by("pid", "tid").len().sort("len", "pid", "tid", descending=[True, False, False]).row(0)
    return ranges.filter((pl.col("pid") == top[0]) & (pl.col("tid") == top[1])).sort("ts_ns")


def _disjoint(ranges: pl.DataFrame) -> bool:
    ends = (ranges["ts_ns"] + ranges["dur_ns"]).shift(1)
    return bool((ranges["ts_ns"] >= ends).fill_null(True).all())


def _numbered(ranges: pl.DataFrame) -> pl.DataFrame:
    """Steps from ranges: numbered by the counter in their names where every name has a different one,
    else 1, 2, ... in time order."""
    if ranges.is_empty():
        return _EMPTY
    counters = ranges["name"].str.extract(r"(\d+)\s*$", 1).cast(pl.Int32)
    use = counters.null_count() == 0 and counters.n_unique() == counters.len()
    number = counters if use else pl.Series(range(1, ranges.height + 1), dtype=pl.Int32)
    return ranges.select(number.alias("step"), "name", "ts_ns", "dur_ns", "event_id").sort("ts_ns")


def _between_optimizer_steps(ranges: pl.DataFrame) -> pl.DataFrame:
    """Windows from the end of one optimizer step to the end of the next (a training step ends with its
    optimizer step): one fewer than the optimizer steps, none below two."""
    optimizer = _one_thread(ranges.filter(pl.col("name").str.contains(_OPTIMIZER_STEP.pattern)))
    if optimizer.height < 2:
        return _EMPTY
    ends = (optimizer["ts_ns"] + optimizer["dur_ns"]).to_list()
    name = AFTER_OPTIMIZER + optimizer["name"][0]
    return pl.DataFrame(
        {
            "step": list(range(1, len(ends))),
            "name": [name] * (len(ends) - 1),
            "ts_ns": ends[:-1],
            "dur_ns": [b - a for a, b in pairwise(ends)],
            "event_id": [None] * (len(ends) - 1),
        },
        schema=_EMPTY.schema,
    )


_EMPTY = pl.DataFrame(
    schema={"step": pl.Int32, "name": pl.String, "ts_ns": pl.Int64, "dur_ns": pl.Int64, "event_id": pl.Int64}
)


def step_rule(steps: pl.DataFrame, steps_from: str | None = None) -> str:
    """In words, what found a trace's steps (what its ``steps`` table holds)."""
    if steps.is_empty():
        return "none (one window: the GPU's busy span)"
    names = steps["name"].drop_nulls()
    first = names[0] if names.len() else ""
    if steps_from is not None:
        return f"ranges matching --steps-from {steps_from!r}"
    if first == WHOLE_CAPTURE:
        return "whole capture (no steps found)"
    if names.str.contains(STEP_NAME).all():
        return "profiler steps"
    if first.startswith(AFTER_OPTIMIZER):
        return f"between optimizer steps ({first.removeprefix(AFTER_OPTIMIZER)!r})"
    return f"user ranges named like {first!r}"


def assign_steps(events: pl.DataFrame, steps: pl.DataFrame, at: str = "ts_ns") -> pl.Series:
    """For each event, the step whose window [start, end) contains the event's ``at`` time (else null)."""
    if steps.is_empty():
        return nulls("step", pl.Int32(), events.height)
    windows = (
        steps.select(
            pl.col("ts_ns").alias("_win_start"),
            (pl.col("ts_ns") + pl.col("dur_ns")).alias("_win_end"),
            pl.col("step").cast(pl.Int32).alias("_win_step"),
        )
        .filter(pl.col("_win_start").is_not_null())
        .sort("_win_start")
    )
    if windows.is_empty():
        return nulls("step", pl.Int32(), events.height)
    # the last window starting at or before each time: a binary search among the (few) windows per event
    times = events.get_column(at)
    last = windows.get_column("_win_start").search_sorted(times, side="right").cast(pl.Int64) - 1
    window = pl.DataFrame({"_t": times, "_i": last}).select(
        pl.when(pl.col("_t").is_not_null() & (pl.col("_i") >= 0)).then(pl.col("_i")).alias("_i"), "_t"
    )
    ends, numbers = (windows.get_column(c).gather(window.get_column("_i")) for c in ("_win_end", "_win_step"))
    inside = window.get_column("_t") < ends
    return pl.select(pl.when(inside).then(numbers)).to_series().alias("step")
