"""What the catalog and the summary line say of a file's events (counts, span, GPUs), gathered chunk by
chunk so that no read has to keep every event for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import polars as pl

#: Event columns an overview is made from.
COLUMNS = ("kind", "ts_ns", "dur_ns", "device")


@dataclass(frozen=True)
class Overview:
    """Event count, first start and last end, events per kind and the GPU indexes seen."""

    n_events: int = 0
    start_ns: int | None = None
    end_ns: int | None = None
    by_kind: dict[str, int] = field(default_factory=dict)
    devices: frozenset[int] = frozenset()

    @classmethod
    def of(cls, events: pl.DataFrame) -> Overview:
        """The overview of ``events`` (at least :data:`COLUMNS`)."""
        span = events.select(
            pl.col("ts_ns").min().alias("start"), (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end")
        )
        return cls(
            n_events=events.height,
            start_ns=span.item(0, "start"),
            end_ns=span.item(0, "end"),
            by_kind=dict(events.group_by("kind").len().iter_rows()),
            devices=frozenset(events.get_column("device").drop_nulls().unique().to_list()),
        )

    def __add__(self, other: Overview) -> Overview:
        """The overview of both sets of events."""
        kinds = dict(self.by_kind)
        for kind, n in other.by_kind.items():
            kinds[kind] = kinds.get(kind, 0) + n
        return Overview(
            n_events=self.n_events + other.n_events,
            start_ns=_either(min, self.start_ns, other.start_ns),
            end_ns=_either(max, self.end_ns, other.end_ns),
            by_kind=kinds,
            devices=self.devices | other.devices,
        )

    def with_steps(self, made: dict[str, int]) -> Overview:
        """The overview with ``made`` events of each kind counted as steps (ranges the model made steps)."""
        if not made:
            return self
        kinds = {k: n - made.get(k, 0) for k, n in self.by_kind.items()}
        kinds["step"] = kinds.get("step", 0) + sum(made.values())
        return replace(self, by_kind={k: n for k, n in kinds.items() if n})

    @property
    def span_ns(self) -> int:
        """From the first start to the last end (0 without events)."""
        return 0 if self.start_ns is None or self.end_ns is None else self.end_ns - self.start_ns


def _either(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else pick(a, b)
