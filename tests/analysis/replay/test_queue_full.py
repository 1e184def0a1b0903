"""The host's waits on a full launch queue: the readers store CUPTI's ranges for them as kind
``queue_full``, and the replay reads each as a wait of the launches it overlaps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl

import traceq
from tests.conftest import SAMPLES
from traceq.analysis.replay.replayer import load_timeline
from traceq.model.categories import QUEUE_FULL_NAME
from traceq.querying.engine import Session
from traceq.store import Store

#: A ResNet-50 trace whose host blocked on a full launch queue 408 times.
TRACE = SAMPLES / "planted" / "leaseC" / "resnet50_b64_fp32_3steps.json.gz"


def test_the_replay_finds_the_waits_on_a_full_launch_queue(tmp_path: Path) -> None:
    events = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    recorded = sorted(e["ts"] for e in events if e.get("name") == QUEUE_FULL_NAME and e.get("ph") == "X")
    assert len(recorded) == 408
    store = Store(tmp_path / "store")
    run_id = traceq.ingest([TRACE], store=store, jobs=1)["run_id"][0]
    kinds = traceq.sql(f"SELECT kind, count(*) AS n FROM events WHERE name = '{QUEUE_FULL_NAME}' GROUP BY kind",
                       store=store)  # fmt: skip
    assert kinds.rows() == [("queue_full", len(recorded))]
    with Session(store, [run_id], own_queries=True) as session:
        timeline = load_timeline(session, run_id)
    assert timeline.waits.height == len(recorded)
    assert (timeline.waits["end"] >= timeline.waits["ts"]).all()
    assert not timeline.host.filter(pl.col("name") == QUEUE_FULL_NAME).height  # waits, not ranges
