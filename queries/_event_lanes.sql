-- _event_lanes: the track each event is drawn on in a trace viewer (the Perfetto export's layout).
-- Requires: _gpu_work_kinds
-- Definition: GPU work (`_gpu_work_kinds`) with a device goes on its stream (`side` 'gpu', `proc` the
-- device, `thread` the stream, else the event's tid); sync records and GPU-side annotations go on the
-- stream of the GPU work of their own source track (its lowest device and stream) where that track holds
-- any; everything else on its host thread (`side` 'host', `proc` and `thread` the source's pid and tid).
-- -1 stands for a missing id. `lane` 0 is the track itself, else a track beside it for what would not
-- nest there (Perfetto lays out slices that do not nest as it can, chrome://tracing not at all): 1 a
-- stream's sync records (waits, which overlap its work), 3 its annotations (which need not enclose its
-- kernels exactly), 2 GPU work that starts before earlier work on its stream ended and a host call (op,
-- op_inner, runtime) that ends after the op around it or starts inside a call beside it that it is not
-- nested in (timing artefacts: a stream runs in order, calls nest).
-- Reads: events(run_id, rank, event_id, kind, pid, tid, device, stream, ts_ns, dur_ns, parent_id), _gpu_work_kinds.
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   event_id  BIGINT   the event
--   work      BOOLEAN  GPU work (a kind of _gpu_work_kinds)
--   side      VARCHAR  gpu (a GPU stream's track) or host (a host thread's)
--   proc      BIGINT   the track's process: the device (gpu) or the source's pid (host)
--   thread    BIGINT   the track: the stream (gpu) or the source's tid (host)
--   lane      INTEGER  0 the track itself; 1 sync records, 2 what overlaps, 3 annotations beside it
WITH typed AS (
  SELECT run_id, rank, event_id, kind, pid, tid, device, stream, ts_ns, dur_ns, parent_id,
         kind IN (SELECT kind FROM _gpu_work_kinds) AS work
  FROM events
),
gpu AS (  -- the device and stream of each source track that holds GPU work
  SELECT run_id, rank, pid, tid, min(device) AS device, min(coalesce(stream, tid)) AS stream
  FROM typed WHERE work AND device IS NOT NULL
  GROUP BY ALL
),
placed AS (
  SELECT e.run_id, e.rank, e.event_id, e.kind, e.work, e.ts_ns, e.dur_ns, e.parent_id,
         coalesce(CASE WHEN e.work THEN e.device END,
                  CASE WHEN e.kind IN ('sync', 'gpu_annotation') THEN g.device END) AS gpu_device,
         coalesce(CASE WHEN e.work AND e.device IS NOT NULL THEN coalesce(e.stream, e.tid) END,
                  CASE WHEN e.kind IN ('sync', 'gpu_annotation') THEN g.stream END) AS gpu_stream,
         e.pid AS src_pid, e.tid AS src_tid
  FROM typed e
  -- (other kinds join on a NULL thread, which matches nothing: a condition on one side alone in a LEFT
  -- JOIN's ON made DuckDB 1 compare every pair of rows)
  LEFT JOIN gpu g ON g.run_id = e.run_id AND g.rank = e.rank AND g.pid = e.pid
   AND g.tid = CASE WHEN e.kind IN ('sync', 'gpu_annotation') THEN e.tid END
),
sided AS (
  SELECT run_id, rank, event_id, kind, work, ts_ns, dur_ns, parent_id,
         CASE WHEN gpu_device IS NULL THEN 'host' ELSE 'gpu' END AS side,
         coalesce(gpu_device, src_pid, -1)::BIGINT AS proc,
         CASE WHEN gpu_device IS NULL THEN coalesce(src_tid, -1) ELSE coalesce(gpu_stream, -1) END::BIGINT AS thread
  FROM placed
),
checked AS (  -- GPU work on its stream, host calls among the calls beside them (same op around them)
  SELECT *, (work AND side = 'gpu') OR (kind IN ('op', 'op_inner', 'runtime') AND side = 'host') AS ordered
  FROM sided
),
reached AS (
  SELECT s.*, a.ts_ns + a.dur_ns AS parent_end,
         CASE WHEN s.ordered THEN max(s.ts_ns + s.dur_ns) OVER (
           PARTITION BY s.run_id, s.rank, s.ordered, s.side, s.proc, s.thread,
                        CASE WHEN s.side = 'host' THEN s.parent_id END
           ORDER BY s.ts_ns, s.event_id
           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) END AS reach
  FROM checked s
  LEFT JOIN (SELECT run_id, rank, event_id, ts_ns, dur_ns FROM events WHERE kind IN ('op', 'op_inner')) a
    ON a.run_id = s.run_id AND a.rank = s.rank AND a.event_id = s.parent_id  -- (a NULL parent matches nothing)
)
SELECT run_id, rank, event_id, work, side, proc, thread,
       CASE WHEN side = 'gpu' AND kind = 'sync' THEN 1
            WHEN side = 'gpu' AND kind = 'gpu_annotation' THEN 3
            WHEN reach > ts_ns OR ts_ns + dur_ns > parent_end THEN 2
            ELSE 0 END::INTEGER AS lane
FROM reached
