"""The profiler's own cost on the host, estimated from the trace itself, and the scenario without it.

The profiler spends host time at every recorded event: before an op's start (recording its inputs),
after its end, inside and around each CUDA runtime call (CUPTI's callbacks), at each Python call and
return when stacks are recorded. That time lies in the *transitions* between consecutive nodes of a
thread (an op's start to its first child's start, a child's end to the next sibling's start, a launch
call's start to its end, ...). The model:

- each slice of a host thread is typed by the nodes around it (``op<op<``: an op's start to another
  op's start; ``L<L>``: inside a launch call; ``py>op<``: a Python function's end to an op's start; ...;
  annotations count as ops, runtime calls that launched GPU work as ``L``, others as ``rt``);
- the profiler's cost in a slice is ``alpha`` times the typical length of slices of its type *in this
  trace* (their median): what one transition costs on this host with this profiler configuration, so
  a slower host, recorded shapes or recorded stacks raise it by themselves. A slice never loses more
  than its CPU time;
- where Python stacks were recorded, the interpreter itself runs slower under the tracer: pure Python
  time (inside Python functions, outside ops and runtime calls) loses a further share ``beta``;
- in torch.profiler traces, a call that searched for an algorithm (``_search_calls``) ran ``search``
  times longer on the host than without the profiler: what is left of its slices is divided by it. The
  factor varied between the runs it was measured on (``SEARCH_LOW`` to ``SEARCH_HIGH``), so an estimate
  of a run with searches carries that range in its band.

``alpha`` and ``beta`` are the same for every trace of a kind (torch.profiler's and Paddle's; Nsight
Systems captures with NVTX op ranges that carry shapes; those whose op ranges carry none), and a capture
with no op ranges is not estimated (:func:`not_modelled`). ``alpha`` was fitted on runs whose step times were
measured cleanly (each round in a fresh process that never started a profiler, 3 rounds, modes
alternating: ``scripts/measure_clean.py``) on the host that recorded their trace; each run is then
estimated with the value fitted on the other models' runs only (``benchmarks/replay_accuracy.py``).

The band of an estimate (:func:`band_width`) is not the spread of ``alpha`` alone: an estimate is as
uncertain as the share of the traced step it removed (the calibration's errors grow with it, 0-35 %
on runs that lost half their traced step), and launch-bound runs vary from round to round and from host
to host by 10-25 % without any profiler. The width is fitted so that the bands hold the clean
measurement of at least 80 % of the calibration runs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import polars as pl

from traceq.analysis.replay.estimates import NOT_ESTIMATED
from traceq.analysis.replay.graph import Graph, derived, same_thread
from traceq.analysis.replay.scenario import Scenario
from traceq.schema import KINETO, NSYS, OP_TREE_KINDS

#: Share of each transition's typical length that is profiler cost: the median of the values 17 cleanly
#: measured runs need (traced on five hosts; 0.97-1.16 leaving each run's model and host out), and their
#: quartiles (the what-ifs' band).
ALPHA, ALPHA_LOW, ALPHA_HIGH = 1.02, 0.77, 1.15
#: An estimate's band, as a natural-log half-width: ``BAND_FLOOR`` plus ``BAND_PER_REMOVED`` times the share
#: of the traced step the estimate removed, plus the steps' own spread (benchmarks/replay_accuracy.py --fit).
BAND_FLOOR, BAND_PER_REMOVED = 0.015, 0.25
#: A comparison's band: this share of the two runs' bands combined as independent errors (the errors of two
#: runs traced on one host largely cancel in their ratio; fitted so the bands hold 80 % of the pairs).
RATIO_SHARE = 0.5
#: Share of pure Python time that the Python tracer adds when stacks are recorded: the median over the
#: three clean runs with stacks (0.34, 0.34, 0.46), and a band around it.
BETA, BETA_LOW, BETA_HIGH = 0.34, 0.20, 0.46
#: How many times longer a call that searched for an algorithm (cuDNN's autotuner) ran on the host under
#: torch.profiler than without it, and the range seen: CUPTI's activity tracing slows the searching itself,
#: which records few events, so the per-transition model cannot see it. Measured on three planted runs
#: whose traced step was almost all search (a conv1d net on two hosts: 1.97x and 2.68x; ResNet-18 with a
#: new image size every step: 1.47x): the point is their geometric mean, the band spans them all.
SEARCH_INFLATION, SEARCH_LOW, SEARCH_HIGH = 1.98, 1.47, 2.68
#: The traces whose searching calls ``SEARCH_INFLATION`` was measured on (torch.profiler's).
SEARCH_FLAVOUR = KINETO
#: ``alpha`` for Nsight Systems captures whose NVTX op ranges carry their input shapes (PyTorch's
#: ``emit_nvtx(record_shapes=True)``), and the range its band spans: formatting the shapes at every op makes
#: a transition cost more than its typical length says. The median of what seven such captures measured
#: without nsys needed, and their range: 1.60 and 1.87 (leaseL), 1.93 and 1.15 (leaseM), 0.79 for FP16
#: with a user's `backward` range besides (leaseO; its FP32 capture, whose last step ran 1.6x its others,
#: needs more than the model's grid holds), the Conformer b4 pair traced and timed on one host each time;
#: 2.12 and 1.71 for the shared Conformer pair, timed on another host (benchmarks/replay_accuracy.py).
NSYS_ALPHA, NSYS_ALPHA_LOW, NSYS_ALPHA_HIGH = 1.7, 0.79, 2.15
#: How many captures ``NSYS_ALPHA`` and its range rest on (said in the estimate's note).
NSYS_CAPTURES = 7
#: ``alpha`` for Nsight Systems captures whose op ranges carry no shapes (``emit_nvtx()``), and its range:
#: the median of what five such captures needed, and their range: 0.89 and 0.84 for an encoder pair
#: traced and timed on one host (leaseN); 0.35, 0.36 and 0.52 for planted encoder runs, each timed on
#: another host than its capture's.
NSYS_PLAIN_ALPHA, NSYS_PLAIN_ALPHA_LOW, NSYS_PLAIN_ALPHA_HIGH = 0.52, 0.35, 0.9
#: How many captures ``NSYS_PLAIN_ALPHA`` and its range rest on.
NSYS_PLAIN_CAPTURES = 5
#: The traces ``NSYS_ALPHA`` was measured on.
NSYS_FLAVOUR = NSYS
#: The quantile of a transition type's slice lengths taken as its typical length.
QUANTILE = 0.5
#: Transition types with fewer slices than this take no cost (too few to say what is typical).
MIN_SLICES = 30


@dataclass(frozen=True)
class OverheadModel:
    """The profiler-cost model's constants (see the module doc)."""

    alpha: float = ALPHA
    beta: float = BETA
    quantile: float = QUANTILE
    min_slices: int = MIN_SLICES
    search: float = SEARCH_INFLATION
    #: the ends of ``alpha``'s range (the what-ifs' band; for nsys captures, the estimate's too)
    alpha_low: float = ALPHA_LOW
    alpha_high: float = ALPHA_HIGH

    def band(self) -> tuple[OverheadModel, OverheadModel]:
        """The models at the low and high ends of the uncertainty band (more and less cost removed)."""
        return (
            replace(self, alpha=self.alpha_high, beta=BETA_HIGH, search=SEARCH_HIGH),
            replace(self, alpha=self.alpha_low, beta=BETA_LOW, search=SEARCH_LOW),
        )


def model_for(flavour: str, shaped: bool = False) -> OverheadModel:
    """The model for traces of ``flavour``: for Nsight Systems captures :data:`NSYS_ALPHA` and its range
    where their op ranges carry input shapes (``shaped``), :data:`NSYS_PLAIN_ALPHA` and its range where
    they do not; the defaults for the others."""
    if flavour == NSYS_FLAVOUR and shaped:
        return OverheadModel(alpha=NSYS_ALPHA, alpha_low=NSYS_ALPHA_LOW, alpha_high=NSYS_ALPHA_HIGH)
    if flavour == NSYS_FLAVOUR:
        return OverheadModel(alpha=NSYS_PLAIN_ALPHA, alpha_low=NSYS_PLAIN_ALPHA_LOW, alpha_high=NSYS_PLAIN_ALPHA_HIGH)
    return OverheadModel()


def not_modelled(flavour: str, ops: int, kernels: float) -> str | None:
    """Why the model cannot estimate a run of ``flavour`` with ``ops`` op ranges and ``kernels`` kernels (over
    the same span), or None where it can: an Nsight Systems capture with fewer op ranges than kernels has no
    ops on the host (only CUDA calls and a few ranges of the user's), where a slice's typical length is the
    framework's own work between two calls, not a transition's cost. On two such captures (leaseM, the
    Conformer b4 pair with NVTX step ranges alone) the model took out 22 % and 61 % too much at the op-range
    captures' alpha, and the two needed alphas far apart (0.85 and 0.37). Other traces: None."""
    if flavour != NSYS_FLAVOUR or ops >= kernels:
        return None
    return (
        f"{NOT_ESTIMATED}: this Nsight Systems capture records CUDA calls with fewer op ranges than kernels "
        f"({ops:,} op ranges, {kernels:,.0f} kernels), and the replay's model of nsys's own host cost holds where ops "
        "are recorded (two captures without them, timed without nsys, needed alphas of 0.85 and 0.37: too few "
        "and too far apart to estimate with). Time the steps without any profiler (a comparison takes them as "
        "--base-step-ms and --new-step-ms), or capture "
        "with PyTorch's NVTX op ranges (torch.autograd.profiler.emit_nvtx())."
    )


def counts_not_modelled(flavour: str, counts: dict[str, int]) -> str | None:
    """:func:`not_modelled` of a run whose events by kind are ``counts`` (the catalog's, or a timeline's)."""
    return not_modelled(flavour, sum(counts.get(k, 0) for k in OP_TREE_KINDS), counts.get("kernel", 0))


def band_width(traced_ms: float, step_ms: float, step_cv: float = 0.0) -> float:
    """The natural-log half-width of the band of an estimate of ``step_ms`` from a traced ``traced_ms``, whose
    steps' estimates varied by ``step_cv`` (their coefficient of variation)."""
    removed = max(0.0, 1.0 - step_ms / traced_ms) if traced_ms > 0 else 0.0
    return BAND_FLOOR + BAND_PER_REMOVED * removed + step_cv


#: The node classes of :func:`slice_types`, in the order of their codes.
NODE_CLASSES = ("op", "L", "rt", "py", "x")
#: :func:`slice_types`' code of a thread's last node (no slice after it).
NO_SLICE = -1


def slice_types(graph: Graph) -> pl.Series:
    """Each slice's transition type (``op<op<``, ``L<L>``, ``py>op<``, ...), as a code: the node before it
    and the node after it each as ``2 * class + side`` (class: the position in :data:`NODE_CLASSES`, where
    ``x`` is a step range's bound; side 0 for a start ``<``, 1 for an end ``>``), the type ``10 * before +
    after``; :data:`NO_SLICE` for a thread's last node. Codes, not text: a trace has millions of slices."""
    launch_rows = graph.items["launch_row"].drop_nulls().unique().implode()
    kind = pl.col("kind")
    node_class = (
        pl.when(kind.is_in([*OP_TREE_KINDS, "annotation"]))
        .then(0)
        .when((kind == "runtime") & pl.col("row").is_in(launch_rows))
        .then(1)
        .when(kind == "runtime")
        .then(2)
        .when(kind == "python")
        .then(3)
        .otherwise(4)
    )
    code = 2 * node_class + pl.when(pl.col("start")).then(0).otherwise(1)
    typ = pl.when(same_thread(-1)).then(10 * code + code.shift(-1)).otherwise(NO_SLICE)
    return graph.nodes.select(typ.cast(pl.Int32).alias("type")).to_series()


def _bounded(types: pl.Expr) -> pl.Expr:
    """Whether a slice type (a :func:`slice_types` code) has a step range's bound on either side."""
    x = NODE_CLASSES.index("x")
    return ((types // 10) // 2 == x) | ((types % 10) // 2 == x)


def typical_lengths(graph: Graph, types: pl.Series, model: OverheadModel) -> dict[int, float]:
    """The typical length of each transition type's slices (those that did not wait), ns."""
    frame = graph.nodes.select("L", "W0").with_columns(type=types)
    usable = frame.filter((pl.col("type") != NO_SLICE) & ~_bounded(pl.col("type")) & (pl.col("W0") >= pl.col("L")))
    typical = usable.group_by("type").agg(pl.len().alias("n"), pl.col("L").quantile(model.quantile).alias("t"))
    return dict(typical.filter(pl.col("n") >= model.min_slices).select("type", "t").iter_rows())


def typical_slice_lengths(graph: Graph, model: OverheadModel) -> pl.Series:
    """Each slice's typical length, its transition type's (:func:`typical_lengths`; 0 for a type with too
    few slices), ns. Every alpha scales the same lengths: they are made once per graph and quantile."""

    def make() -> pl.Series:
        types = slice_types(graph)
        typical = typical_lengths(graph, types, model)
        return types.replace_strict(typical, default=0.0, return_dtype=pl.Float64)

    return derived(graph, ("typical_slice_lengths", model.quantile, model.min_slices), make)


def profiler_cost(graph: Graph, model: OverheadModel | None = None, W: pl.Series | None = None) -> pl.Series:
    """The profiler's cost in each slice under ``model``, ns (never more than the slice's CPU time ``W``,
    by default the recorded ``W0``)."""
    model = model or OverheadModel()
    W = graph.nodes["W0"] if W is None else W
    per_type = typical_slice_lengths(graph, model) * model.alpha
    cost = pl.select(pl.min_horizontal(per_type, W)).to_series()
    if graph.timeline.stacks and model.beta:
        n = graph.nodes
        pure_python = (n["py"] > 0) & (n["op"] == 0) & (n["rt"] == 0)
        rest = W - cost
        cost = pl.select(pl.when(pure_python).then(cost + rest * model.beta).otherwise(cost)).to_series()
    if model.search > 1 and graph.timeline.flavour == SEARCH_FLAVOUR:
        inside = in_search(graph)
        rest = W - cost
        cost = pl.select(pl.when(inside).then(cost + rest * (1 - 1 / model.search)).otherwise(cost)).to_series()
    return cost.alias("cost")


def in_search(graph: Graph) -> pl.Series:
    """Whether each slice lies inside a call that searched for an algorithm (``_search_calls``)."""
    nodes = graph.nodes
    inside = pl.Series("inside", [False] * nodes.height)
    for thread, ts, end in graph.timeline.host.filter(pl.col("search")).select("thread", "ts", "end").iter_rows():
        inside = inside | ((nodes["thread"] == thread) & (nodes["T"] >= ts) & (nodes["T"] < end))
    return inside


def overhead_scenario(
    graph: Graph,
    model: OverheadModel | None = None,
    base: Scenario | None = None,
    name: str = "unprofiled",
    host_scale: float = 1.0,
) -> Scenario:
    """``base`` (the trace by default) with the profiler's cost taken out of every slice; launch latencies
    shrink by what their launch call lost (the GPU work can start as much earlier). ``host_scale``
    multiplies the CPU time left (a host-speed normalisation, see :mod:`traceq.analysis.replay.verdict`)."""
    model = model or OverheadModel()
    W = base.W if base is not None and base.W is not None else graph.nodes["W0"]
    cost = profiler_cost(graph, model, W)
    items = graph.items
    lost = cost.gather(items["launch_node"].fill_null(0))
    shift = pl.select(
        pl.when(items["launch_node"].is_not_null())
        .then(-pl.min_horizontal(lost, items["lat"].fill_null(0.0).clip(lower_bound=0.0)))
        .otherwise(0.0)
    ).to_series()
    if base is not None and base.lat_shift is not None:
        shift = shift + pl.Series(base.lat_shift, dtype=pl.Float64)
    return Scenario(
        name=name,
        W=(W - cost).clip(lower_bound=0.0) * host_scale,
        barrier_on=base.barrier_on if base is not None else None,
        dropped=base.dropped if base is not None else None,
        lat_shift=shift.to_list(),
        notes=[
            *(base.notes if base is not None else []),
            f"profiler cost removed: alpha={model.alpha:g} of each transition's typical length"
            + (f", beta={model.beta:g} of pure Python time (stacks recorded)" if graph.timeline.stacks else "")
            + (f"; host CPU time scaled by {host_scale:.3f}" if host_scale != 1.0 else ""),
        ],
    )
