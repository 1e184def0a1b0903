"""How well the replay's estimate without the profiler matches step times measured cleanly.

Every run with a clean step time (``sample_traces/planted/manifest.json``: each run timed in fresh
processes that never profiled, 3 rounds alternating; the shared Conformer traces' ``step_ms_clean``) is
replayed without the profiler's host cost over a grid of the model's ``alpha``. Then

- the alpha each run needs (interpolated on the grid) and the model's constant, the median over runs
  whose trace and rounds come from one host and whose traced step is at least 15 % above the measured one;
- leave one model out: each run is estimated with the constant fitted on the *other models'* runs only,
  and its error against the measured step;
- per pair (BASE -> NEW on one host): the estimated NEW/BASE ratio with its band against the measured
  ratio (the reference: the median over rounds of NEW's time over BASE's in that round, with the
  lowest and highest of those), inside or not, the direction right or not; the traced ratio beside it (what a
  reader of the raw trace would conclude);
- the summary figures: share of pairs within 10 % of the measured ratio, bands that hold the measured
  ratio, directions right where the measured difference is larger than its rounds' spread.

Usage: python benchmarks/replay_accuracy.py [--store DIR] [--fit] [--no-host-scale]
(``--store`` keeps the ingested traces between runs; ``--fit`` prints the constants to put in
``traceq/analysis/replay/overhead.py``.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import operator
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "sample_traces" / "planted"
SHARED = ROOT.parent / "shared" / "traces"
GRID = [0.0, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0, 1.3, 1.7, 2.2, 3.0]

#: BASE -> NEW pairs measured on one host (the manifest's ``measured_on``), by run name.
PAIRS = [
    ("control_fp32", "control_fp16"),
    ("resnet18_b4_fp32", "resnet18_b4_fp16"),
    ("resnet50_b64_fp32", "resnet50_b64_fp16"),
    ("enc_fp32", "enc_fp16"),
    ("conformer_fp32_b4", "conformer_fp16_b4"),
    ("conformer_fp32_b64", "conformer_fp16_b64"),
    ("paddlefmt_conformer_fp32_b64", "paddlefmt_conformer_fp16_b64"),
    ("workers8_fp16", "input8_fp16"),
    ("base128_fp32", "sync128_fp32"),
    ("base128_fp32", "alloc128_fp32"),
    ("cudnn_var_nobench_fp16", "cudnn_var_fp16"),
    ("nsys_enc_b128_fp16", "nsys_sync_b128_fp16"),
    ("nsys_conformer_fp32_b4", "nsys_conformer_fp16_b4"),
    ("nsys_ops_conformer_fp32_b4", "nsys_ops_conformer_fp16_b4"),  # train_step ranges and op ranges
    ("nsys_plain_enc_fp32", "nsys_plain_enc_fp16"),  # train_step ranges and op ranges without shapes
    ("nsys_user_conformer_fp32_b4", "nsys_user_conformer_fp16_b4"),  # as nsys_ops, and a user's `backward` range
    # (leaseM's captures of this pair with train_step ranges alone are not estimated: no op ranges)
    ("bert_b4_fp32", "bert_b4_fp16"),
    ("resnet18_var_nobench_fp16", "resnet18_var_fp16"),
    ("enc_noscale_fp16", "half_fp16"),  # autocast -> O2 (fp16 weights, no autocast)
    ("bert_b4_noscale_fp16", "bert_b4_half"),
]

#: Fixes applied for real: the run with the cause, its fixed twin (rounds on one host), the what-if for it.
FIXES = [
    ("sync128_fp32", "base128_fp32", "host_sync"),
    ("nsys_sync_b128_fp16", "nsys_enc_b128_fp16", "host_sync"),
    ("input8_fp16", "workers8_fp16", "input_pipeline"),
    ("alloc128_fp32", "base128_fp32", "allocator"),
    ("cudnn_var_fp16", "cudnn_var_nobench_fp16", "algorithm_search"),
    ("enc_fp16", "half_fp16", "cast_overhead"),
    ("enc_noscale_fp16", "half_fp16", "cast_overhead"),
    ("resnet18_b4_fp16", "resnet18_b4_half", "cast_overhead"),
    ("resnet18_b4_noscale_fp16", "resnet18_b4_half", "cast_overhead"),
    ("bert_b4_fp16", "bert_b4_half", "cast_overhead"),
    ("bert_b4_noscale_fp16", "bert_b4_half", "cast_overhead"),
    ("resnet18_var_fp16", "resnet18_var_nobench_fp16", "algorithm_search"),
]


@dataclass
class Run:
    name: str
    file: Path
    model: str
    measured: float
    rounds: list[float]
    same_host: bool
    round_numbers: list[int] | None
    lease: str = ""
    stacks: bool = False
    traced: float = 0.0
    curve: list[float] = field(default_factory=list)  # step_ms over GRID
    replayer: object = None
    alpha_req: float | None = None
    est: float = 0.0


def lease_runs(folder: Path, suffix: str) -> dict[str, Run]:
    """The runs of one folder's manifest (keyed ``RUN`` plus ``suffix``): traces, captures and fixes timed
    without a trace."""
    out: dict[str, Run] = {}
    doc = json.loads((folder / "manifest.json").read_text())
    for file, v in {**doc["traces"], **doc["captures"]}.items():
        name = file.split("_3steps")[0].split("_4steps")[0] + suffix
        out[name] = Run(name, folder / file, v["model"], v["step_ms"], v["step_ms_rounds"], v["same_host"],
                        v.get("round_numbers"), v["measured_on"])  # fmt: skip
    for name, v in doc["measured_only"].items():  # fixes timed without a committed trace
        out[name + suffix] = Run(name + suffix, Path(), v["model"], v["step_ms"], v["step_ms_rounds"], True,
                                 v.get("round_numbers"), v["measured_on"])  # fmt: skip
    return out


def runs() -> dict[str, Run]:
    """Every run with a clean measurement: the planted set's first lease (``RUN``), the later leases' in
    their folders (``RUN@LEASE``), and the shared Conformer traces (with the shared nsys captures of the b4
    pair, timed by those traces' rounds on another host)."""
    out = lease_runs(PLANTED, "")
    for folder in sorted(p.parent for p in PLANTED.glob("*/manifest.json")):
        out |= lease_runs(folder, f"@{folder.name}")
    kineto = json.loads((SHARED / "kineto" / "runs.json").read_text())["runs"]
    for v in kineto:
        name = v["trace"].removesuffix(".json.gz")
        if "shapes" in name:
            continue
        out[name] = Run(name, SHARED / "kineto" / v["trace"], "conformer", v["step_ms_clean"],
                        v["step_ms_clean_rounds"], True, None, "kineto")  # fmt: skip
        capture = SHARED / "nsys" / f"nsys_{name}.sqlite.gz"
        if capture.exists():  # the same runs captured under nsys on another host
            out[f"nsys_{name}"] = Run(f"nsys_{name}", capture, "conformer", v["step_ms_clean"],
                                      v["step_ms_clean_rounds"], False, None, "kineto")  # fmt: skip
        layout = SHARED / "paddle-gpu-layout" / f"paddlefmt_{v['trace']}"
        if layout.exists():  # the same events in Paddle's layout
            out[f"paddlefmt_{name}"] = Run(f"paddlefmt_{name}", layout, "conformer", v["step_ms_clean"],
                                           v["step_ms_clean_rounds"], True, None, "kineto")  # fmt: skip
    return out


def lease_pairs(rs: dict[str, Run], pairs: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """``pairs`` on every lease that has both runs (``RUN`` and ``RUN@LEASE`` keys)."""
    leases = {""} | {k.partition("@")[2] for k in rs if "@" in k}
    return [
        tuple(x + (f"@{lease}" if lease else "") for x in pair[:2]) + pair[2:]
        for lease in sorted(leases)
        for pair in pairs
        if all(x + (f"@{lease}" if lease else "") in rs for x in pair[:2])
    ]


def by_round(new: Run, base: Run, op: Callable[[float, float], float]) -> list[float]:
    """``op(new, base)`` in each round both runs had (by round number; manifests written before round
    numbers were kept list complete rounds in order)."""
    if new.round_numbers and base.round_numbers:
        of_base = dict(zip(base.round_numbers, base.rounds, strict=True))
        return [op(n, of_base[k]) for k, n in zip(new.round_numbers, new.rounds, strict=True) if k in of_base]
    return [op(n, b) for n, b in zip(new.rounds, base.rounds, strict=False)]


def paired(new: Run, base: Run, op: Callable[[float, float], float]) -> tuple[float, float, float]:
    """(median, lowest, highest) of :func:`by_round`: a round times a pair's two modes next to each other
    (their order alternating), so the host's drift over the rounds (one lease's launch-bound steps slowed
    1.3-1.8x over nine minutes) cancels in the pair where it would not across rounds."""
    vals = by_round(new, base, op)
    return statistics.median(vals), min(vals), max(vals)


def repeatability(
    pairs: list[tuple[Run, Run]], op: Callable[[float, float], float] = operator.truediv, within: float = 0.10
) -> tuple[int, int, int]:
    """How often the measurement agrees with itself: (rounds whose ``op(NEW, BASE)`` lies within ``within``
    of the median of the pair's other rounds, rounds, pairs whose rounds do so every time). No estimate can
    be expected to meet the measured value within that more often than one round meets the others'."""
    hits = total = steady = 0
    for base, new in pairs:
        vals = by_round(new, base, op)
        ok = [abs(r / statistics.median(vals[:i] + vals[i + 1 :]) - 1) <= within for i, r in enumerate(vals)]
        hits, total, steady = hits + sum(ok), total + len(ok), steady + all(ok)
    return hits, total, steady


def alpha_needed(curve: list[float], target: float) -> float | None:
    """The alpha at which the (decreasing) curve meets ``target``, or None outside the grid."""
    if curve[0] <= target:
        return 0.0
    for i in range(len(GRID) - 1):
        a, b = curve[i], curve[i + 1]
        if a >= target >= b and a != b:
            return GRID[i] + (a - target) / (a - b) * (GRID[i + 1] - GRID[i])
    return None


def is_nsys(r: Run) -> bool:
    """Whether ``r`` is an Nsight Systems capture (its replay's timeline says so)."""
    from traceq.schema import NSYS

    return r.replayer is not None and r.replayer.timeline.flavour == NSYS  # type: ignore[attr-defined]


def shaped_of(r: Run) -> bool:
    """Whether a run's op ranges carry input shapes (its replayer's timeline)."""
    return bool(r.replayer.timeline.shaped)  # type: ignore[attr-defined]


def stored_name(r: Run) -> str:
    """The name a run is ingested under: its file's stem, with the lease of a later lease's folder."""
    stem = r.file.name.removesuffix(".gz").rsplit(".", 1)[0]
    return stem + (f".{r.name.partition('@')[2]}" if "@" in r.name else "")


def replay_all(rs: dict[str, Run], store_dir: str) -> None:
    import traceq
    from traceq.analysis.replay.engine import replay
    from traceq.analysis.replay.overhead import OverheadModel, overhead_scenario
    from traceq.analysis.replay.replayer import Replayer
    from traceq.querying.engine import Session
    from traceq.store import Store

    store = Store(store_dir)
    have = set(store.catalog()["name"].to_list()) if store.exists() else set()
    for r in rs.values():
        if r.file.name and stored_name(r) not in have:
            traceq.ingest([str(r.file)], store=store_dir, name=stored_name(r))
    for r in rs.values():
        if not r.file.name:
            continue
        run_id = store.resolve(stored_name(r))
        with Session(store, [run_id], use_stored=False) as s:
            rp = Replayer.load(s, run_id)
        r.replayer = rp
        r.stacks = rp.timeline.stacks
        r.traced = rp.traced().step_ms
        beta = OverheadModel().beta
        r.curve = [replay(rp.graph, overhead_scenario(rp.graph, OverheadModel(a, beta))).step_ms for a in GRID]
        print(f"  {r.name}: traced {r.traced:.2f} ms, measured {r.measured:.2f} ms", file=sys.stderr, flush=True)


def held_out_alpha(r: Run, fit: list[Run]) -> float:
    """The alpha ``r`` is estimated with: the median over the fitting runs of other models traced on other
    hosts (other models alone where no other host has one)."""
    others = [x.alpha_req for x in fit if x.model != r.model and x.lease != r.lease and x.alpha_req is not None]
    return statistics.median(others or [x.alpha_req for x in fit if x.model != r.model and x.alpha_req is not None])


def q(values: list[float], p: float) -> float:
    """The ``p`` quantile (0..1) of ``values``, linear between order statistics."""
    v = sorted(values)
    k = (len(v) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", default=None)
    ap.add_argument("--fit", action="store_true")
    a = ap.parse_args()
    rs = runs()
    replay_all(rs, a.store or tempfile.mkdtemp(prefix="replay-accuracy-"))
    from traceq.analysis.replay.overhead import (
        ALPHA,
        NSYS_ALPHA,
        NSYS_ALPHA_HIGH,
        NSYS_ALPHA_LOW,
        NSYS_FLAVOUR,
        NSYS_PLAIN_ALPHA,
        NSYS_PLAIN_ALPHA_HIGH,
        NSYS_PLAIN_ALPHA_LOW,
        RATIO_SHARE,
        OverheadModel,
        counts_not_modelled,
        model_for,
    )
    from traceq.analysis.replay.verdict import compare_replayers

    traced_runs = {k: r for k, r in rs.items() if r.curve}
    only = {k: r for k, r in rs.items() if not r.curve}
    rs = traced_runs
    for r in rs.values():
        r.alpha_req = alpha_needed(r.curve, r.measured)
    # runs whose step is mostly algorithm search fit the search factor, not alpha; Nsight Systems captures
    # fit an alpha of their own (NSYS_ALPHA)
    fit = [r for r in rs.values() if r.same_host and not r.stacks and r.traced > 1.15 * r.measured
           and r.alpha_req is not None and not r.name.startswith("paddlefmt_") and not is_nsys(r)
           and not r.replayer.timeline.host["search"].any()]  # type: ignore[attr-defined]  # fmt: skip
    alphas = sorted(r.alpha_req for r in fit if r.alpha_req is not None)
    print(f"alpha needed over {len(fit)} fitting runs: median {statistics.median(alphas):.3f}, "
          f"quartiles {q(alphas, 0.25):.3f}-{q(alphas, 0.75):.3f}; the code's ALPHA {ALPHA:g}")  # fmt: skip
    # every nsys capture that some alpha of the grid meets, on one host or not (few were timed on theirs);
    # the search factor is torch.profiler's, so searching captures count too, where alpha meets them. Op
    # ranges with input shapes (NSYS_ALPHA) and without (NSYS_PLAIN_ALPHA) fit apart; captures without op
    # ranges are not estimated (not_modelled), and left out.
    unmodelled = {k for k, r in rs.items()
                  if is_nsys(r) and counts_not_modelled(NSYS_FLAVOUR, r.replayer.timeline.counts)}  # type: ignore[attr-defined]  # fmt: skip
    nsys_fit = [r for r in rs.values() if is_nsys(r) and r.traced > 1.15 * r.measured and r.alpha_req is not None
                and r.name not in unmodelled]  # fmt: skip
    needs = [float(r.alpha_req) for r in nsys_fit]  # type: ignore[arg-type]
    groups = {True: (NSYS_ALPHA, NSYS_ALPHA_LOW, NSYS_ALPHA_HIGH),
              False: (NSYS_PLAIN_ALPHA, NSYS_PLAIN_ALPHA_LOW, NSYS_PLAIN_ALPHA_HIGH)}  # fmt: skip
    for shaped, (point, low, high) in groups.items():
        group = [(r, x) for r, x in zip(nsys_fit, needs, strict=True) if shaped_of(r) == shaped]
        each = ", ".join(f"{r.name} {x:.2f}{'' if r.same_host else ' (other host)'}" for r, x in group)
        xs = [x for _, x in group] or [float("nan")]
        print(f"Nsight Systems captures, op ranges {'with' if shaped else 'without'} shapes: alpha needed over "
              f"{len(group)} runs ({each}): median {statistics.median(xs):.3f}, range {min(xs):.2f}-{max(xs):.2f}; "
              f"the code's {point:g} ({low:g}-{high:g})")  # fmt: skip
    print(f"Nsight Systems captures without op ranges, not estimated: {', '.join(sorted(unmodelled)) or 'none'}")
    print()
    print(
        "| run | model | same host | traced ms | measured ms (rounds) | alpha needed | estimate (band) "
        "| error | in band |"
    )
    print("|---|---|:-:|---:|---:|---:|---:|---:|:-:|")
    held, errs, k_need, held_alphas = 0, [], [], []
    same = [r for r in rs.values() if r.same_host]
    for r in rs.values():
        if r.name in unmodelled:
            need = "-" if r.alpha_req is None else f"{r.alpha_req:.2f}"
            print(f"| {r.name} | {r.model} | {'yes' if r.same_host else 'no'} | {r.traced:.2f} | {r.measured:.2f} | "
                  f"{need} | not estimated (no op ranges) | - | - |")  # fmt: skip
            continue
        if is_nsys(r):  # held out among the captures of its kind: the other captures' median, and their range
            model = model_for(NSYS_FLAVOUR, shaped_of(r))
            others = [x for o, x in zip(nsys_fit, needs, strict=True) if o is not r and shaped_of(o) == shaped_of(r)]
            al = statistics.median(others or [model.alpha])
            if others:  # (the band's ends, as the code's: the range of what the captures needed)
                model = replace(model, alpha_low=min(others), alpha_high=max(others))
            r.replayer.model = replace(model, alpha=al)  # type: ignore[attr-defined]
        else:
            al = held_out_alpha(r, fit)
            held_alphas.append(al)
            r.replayer.model = OverheadModel(alpha=al)  # type: ignore[attr-defined]
        e = r.replayer.unprofiled()  # type: ignore[attr-defined]
        r.est = e.step_ms
        inside = e.low_ms <= r.measured <= e.high_ms
        err = math.log(e.step_ms / r.measured)
        removed = max(1e-9, 1 - e.step_ms / e.traced_ms)
        if r.same_host:
            held += inside
            errs.append(err)
            k_need.append((r.lease, max(0.0, abs(err) - 0.03) / removed))
        need = "-" if r.alpha_req is None else f"{r.alpha_req:.2f}"
        rounds = ", ".join(f"{x:.1f}" for x in r.rounds)
        print(f"| {r.name} | {r.model} | {'yes' if r.same_host else 'no'} | {r.traced:.2f} | {r.measured:.2f} "
              f"({rounds}) | {need} | {e.step_ms:.2f} ({e.low_ms:.2f}-{e.high_ms:.2f}) α {al:.2f} | "
              f"{(e.step_ms / r.measured - 1) * 100:+.1f}% | {'yes' if inside else 'no'} |")  # fmt: skip
    within = sum(abs(math.exp(x) - 1) <= 0.15 for x in errs)
    held_k = sum(need <= q([x for ls, x in k_need if ls != lease], 0.8) for lease, need in k_need)
    print(f"\nruns traced and measured on one host: {within} of {len(same)} estimates within 15 % of the measured "
          f"step; bands hold {held} of {len(same)} (target 80 %); a BAND_PER_REMOVED fitted on the other hosts' runs "
          f"would hold {held_k} of {len(same)}")  # fmt: skip
    print(f"alpha leaving each run's model and host out: {min(held_alphas):.2f}-{max(held_alphas):.2f}")
    if a.fit:
        print(f"fit: ALPHA = {statistics.median(alphas):.3f} (quartiles {q(alphas, 0.25):.2f}-{q(alphas, 0.75):.2f}); "
              f"BAND_PER_REMOVED for 80 % of runs: {q([x for _, x in k_need], 0.8):.3f}")  # fmt: skip
    print()
    for scaled in (True, False):
        print(f"host-speed scaling {'on (as reports do)' if scaled else 'off'}:")
        print()
        print(
            "| BASE -> NEW | traced NEW/BASE | estimated (band) | measured (rounds' range) | within 10 % "
            "| in band | direction | host scaled |"
        )
        print("|---|---:|---:|---:|:-:|:-:|:-:|:-:|")
        inside = close = right = decisive = 0
        share_need = []
        for base, new in lease_pairs(rs, PAIRS):
            b, n = rs[base], rs[new]
            v = compare_replayers(b.replayer, n.replayer, normalize_host=scaled)  # type: ignore[arg-type]
            est = v.new.step_ms / v.base.step_ms
            band = (1 + v.change_low / 100, 1 + v.change_high / 100)
            meas, *rng = paired(n, b, operator.truediv)
            ok_band = band[0] <= meas <= band[1]
            share_need.append((b.lease, abs(math.log(est / meas)) / math.hypot(v.base.width, v.new.width)))
            ok_close = abs(est / meas - 1) <= 0.10
            clear = not (rng[0] <= 1 <= rng[1])
            ok_dir = (est > 1) == (meas > 1)
            inside += ok_band
            close += ok_close
            decisive += clear
            right += clear and ok_dir
            print(f"| {base} -> {new} | {n.traced / b.traced:.3f} | {est:.3f} ({band[0]:.3f}-{band[1]:.3f}) | "
                  f"{meas:.3f} ({rng[0]:.3f}-{rng[1]:.3f}) | {'yes' if ok_close else 'no'} | "
                  f"{'yes' if ok_band else 'no'} | {'right' if ok_dir else 'wrong'}"
                  f"{'' if clear else ' (measured within noise)'} | {v.scaled or '-'} |")  # fmt: skip
        k = len(lease_pairs(rs, PAIRS))
        print(f"\nestimated ratio within 10 % of the measured one: {close} of {k} pairs (target: 90 %)")
        hits, total, steady = repeatability([(rs[b], rs[n]) for b, n in lease_pairs(rs, PAIRS)])
        print(f"reference, the measurement against itself: a round's NEW/BASE within 10 % of the median of the "
              f"pair's other rounds on {hits} of {total} rounds ({hits / total:.0%}); every round so on {steady} "
              f"of {k} pairs")  # fmt: skip
        print(f"band holds the measured ratio: {inside} of {k} pairs (target: 80 %)")
        print(f"direction right where the measured difference exceeds its rounds' spread: {right} of {decisive} "
              f"(target: all)")  # fmt: skip
        traced_right = sum(
            (rs[n].traced > rs[b].traced) == (paired(rs[n], rs[b], operator.truediv)[0] > 1)
            for b, n in lease_pairs(rs, PAIRS)
        )
        print(f"reference, the traced steps: direction right on {traced_right} of {k} pairs")
        held = sum(need <= q([x for ls, x in share_need if ls != lease] or [RATIO_SHARE], 0.8)
                   for lease, need in share_need)  # fmt: skip
        print(f"held out by host: a RATIO_SHARE fitted on the other hosts' pairs holds {held} of {k} pairs")
        if a.fit:
            print(f"fit: RATIO_SHARE for 80 % of pairs: {q([x for _, x in share_need], 0.8):.3f} (now {RATIO_SHARE:g})")
        print()
    print(
        "What a fix saves: the what-if on the run with the cause against the fix applied for real (clean rounds "
        "of both on one host)"
    )
    print()
    print(
        "| fix | run -> fixed run | predicted saving ms (band) | measured saving ms (rounds' range) | error | "
        "within 25 % |"
    )
    print("|---|---|---:|---:|---:|:-:|")
    within, measured = [], []
    for run, fixed, cause in lease_pairs({**rs, **only}, FIXES):
        if run not in rs:  # the run with the cause timed on this lease but traced on another
            continue
        r, f = rs[run], rs.get(fixed) or only[fixed]
        measured.append((f, r))
        w = r.replayer.what_if([cause]).row(0, named=True)  # type: ignore[attr-defined]
        meas, lo, hi = paired(r, f, operator.sub)
        err = (w["saving_ms"] / meas - 1) * 100 if meas else float("nan")
        within.append(abs(err) <= 25)
        print(f"| {cause} | {run} -> {fixed} | {w['saving_ms']:.2f} ({w['saving_low']:.2f}-{w['saving_high']:.2f}) | "
              f"{meas:.2f} ({lo:.2f} to {hi:.2f}) | {err:+.0f}% | {'yes' if within[-1] else 'no'} |")  # fmt: skip
    print()
    print(f"within 25 %: {sum(within)} of {len(within)} fixes (target: all)")
    hits, total, steady = repeatability(measured, operator.sub, 0.25)
    print(f"reference, the measurement against itself: a round's saving within 25 % of the median of the fix's "
          f"other rounds on {hits} of {total} rounds ({hits / total:.0%}); every round so on {steady} of "
          f"{len(measured)} fixes")  # fmt: skip
    o2_split(rs, only)


def o2_split(rs: dict[str, Run], only: dict[str, Run]) -> None:
    """What the O2 fix removes, split by the runs between AMP and O2: autocast without GradScaler
    (``*_noscale_fp16``), measured on one host, against the what-if on each traced run."""
    print()
    print(
        "The O2 fix split (medians over rounds of the difference in each round, ms per step; the what-if of the "
        "AMP run removes casts and loss scaler, of the autocast-only run the casts):"
    )
    print()
    print(
        "| model@lease | AMP -> autocast only: GradScaler | autocast only -> O2: autocast | what-if on AMP | "
        "what-if on autocast only |"
    )
    print("|---|---:|---:|---:|---:|")
    every = {**rs, **only}
    leases = sorted({k.partition("@")[2] for k in every if "@" in k})
    models = (("enc", "half_fp16"), ("resnet18_b4", "resnet18_b4_half"), ("bert_b4", "bert_b4_half"))
    for lease, (m, o2) in itertools.product(leases, models):
        names = [f"{x}@{lease}" for x in (f"{m}_fp16", f"{m}_noscale_fp16", o2)]
        if not all(x in every for x in names):
            continue
        a, c, h = (every[x] for x in names)
        scaler, cast = paired(a, c, operator.sub)[0], paired(c, h, operator.sub)[0]
        pred = [f"{x.replayer.what_if(['cast_overhead'])['saving_ms'][0]:.2f}" if x.replayer else "-" for x in (a, c)]  # type: ignore[attr-defined]
        print(f"| {m}@{lease} | {scaler:.2f} | {cast:.2f} | {pred[0]} | {pred[1]} |")


if __name__ == "__main__":
    main()
