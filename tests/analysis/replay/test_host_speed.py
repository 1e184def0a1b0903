"""The host's speed read from bookkeeping ops: the same events give the same speed in either layout.

The shared Conformer b64 traces exist in Kineto's layout and, rewritten event for event, in Paddle 2.4's,
which stores an op nested in another as ``op_inner``. The speed measure read only top-level ops in
Paddle's layout (600 of 3,160 ``aten::view`` calls in the fp32 trace), so the two layouts put the
fp16/fp32 host-speed ratio on either side of the scaling threshold (1.15 against 1.20) and one comparison
was host-scaled while the other was not."""

from __future__ import annotations

import pytest

import traceq
from tests.conftest import SHARED
from traceq.analysis.replay import Replayer
from traceq.analysis.replay.speed import TRIVIAL_OPS, speed_ratio, trivial_durations
from traceq.querying.engine import Session
from traceq.store import Store

pytestmark = pytest.mark.slow

FILES = {
    "kineto": {m: SHARED / "kineto" / f"conformer_{m}_b64.json.gz" for m in ("fp32", "fp16")},
    "paddle": {m: SHARED / "paddle-gpu-layout" / f"paddlefmt_conformer_{m}_b64.json.gz" for m in ("fp32", "fp16")},
}


@pytest.fixture(scope="module")
def timelines(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], object]:
    store_dir = tmp_path_factory.mktemp("speed") / "store"
    for layout, files in FILES.items():
        for mode, path in files.items():
            traceq.ingest([str(path)], store=store_dir, name=f"{layout}_{mode}", jobs=1)
    store = Store(store_dir)
    out = {}
    for layout in FILES:
        for mode in ("fp32", "fp16"):
            run_id = store.resolve(f"{layout}_{mode}")
            with Session(store, [run_id], use_stored=False) as s:
                out[layout, mode] = Replayer.load(s, run_id).timeline
                out[layout, mode, "sql"] = s.sql(
                    "SELECT name, count(*) AS n, median(dur_ns) AS d FROM events "
                    f"WHERE kind IN ('op', 'op_inner') AND name IN {tuple(TRIVIAL_OPS)} GROUP BY name"
                )
    return out


def test_both_layouts_measure_the_same_bookkeeping_ops(timelines) -> None:
    for mode in ("fp32", "fp16"):
        k, p = (trivial_durations(timelines[layout, mode]).sort("name") for layout in ("kineto", "paddle"))
        assert k["name"].to_list() == p["name"].to_list()
        assert k["n"].to_list() == p["n"].to_list()
        assert k["d"].to_list() == pytest.approx(p["d"].to_list(), rel=0.01)
        sql = timelines["kineto", mode, "sql"].sort("name")  # every op call of those names, read with SQL
        assert k["n"].to_list() == sql["n"].to_list()
        assert k["d"].to_list() == pytest.approx(sql["d"].to_list(), rel=1e-9)
    assert int(trivial_durations(timelines["paddle", "fp32"]).filter(name="aten::view")["n"].item()) == 3160


def test_both_layouts_give_one_speed_ratio(timelines) -> None:
    k = speed_ratio(timelines["kineto", "fp16"], timelines["kineto", "fp32"])
    p = speed_ratio(timelines["paddle", "fp16"], timelines["paddle", "fp32"])
    assert k is not None and p == pytest.approx(k, rel=0.005)
