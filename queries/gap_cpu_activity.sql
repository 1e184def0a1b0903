-- gap_cpu_activity: what the launching CPU thread was doing while the GPU waited for it.
-- Requires: gpu_gaps, _cast_ops
-- Definition: for each host-launch gap (see gpu_gaps), the top-level ops (depth 0) of the thread that
-- launched the next GPU event, each counted for the part of its time that overlaps the gap; the rest of
-- the gap, where no top-level op ran on that thread, is reported as '(no op)'. Summed per window and op.
-- is_cast marks ops of the cast family (see _cast_ops).
-- Reads: gpu_gaps, _cast_ops, events(kind, depth, name, ts_ns, dur_ns, pid, tid).
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank
--   step       INTEGER  window's step
--   device     INTEGER  GPU index
--   op         VARCHAR  top-level op name, or '(no op)'
--   gap_ns     BIGINT   host-launch gap time this op covered, ns
--   gaps       BIGINT   host-launch gaps it overlapped
--   is_cast    BOOLEAN  the op converts dtype or wraps a conversion
WITH gaps AS (
  SELECT * FROM gpu_gaps WHERE kind = 'host_launch'
),
top_ops AS (  -- top-level ops of each thread, numbered in time order (they do not overlap each other)
  SELECT run_id, rank, pid, tid, name, ts_ns, ts_ns + dur_ns AS end_ns,
         row_number() OVER (PARTITION BY run_id, rank, pid, tid ORDER BY ts_ns, event_id) AS k
  FROM events
  WHERE kind = 'op' AND depth = 0
),
first_op AS (  -- the last top-level op that started at or before the gap start (it may still be running)
  SELECT g.*, o.k AS k_first
  FROM gaps g
  ASOF LEFT JOIN top_ops o
    ON o.run_id = g.run_id AND o.rank = g.rank AND o.pid = g.launch_pid AND o.tid = g.launch_tid
   AND g.gap_start_ns >= o.ts_ns
),
spans AS (  -- ... through the last one that started before the gap end: the ops that can overlap it
  SELECT g.*, o.k AS k_last
  FROM first_op g
  ASOF LEFT JOIN top_ops o
    ON o.run_id = g.run_id AND o.rank = g.rank AND o.pid = g.launch_pid AND o.tid = g.launch_tid
   AND g.gap_end_ns > o.ts_ns
),
candidates AS (
  SELECT *, unnest(range(coalesce(k_first, 1), k_last + 1)) AS k FROM spans WHERE k_last IS NOT NULL
),
overlapping AS (
  SELECT g.run_id, g.rank, g.step, g.device, g.gap_start_ns, o.name AS op,
         least(o.end_ns, g.gap_end_ns) - greatest(o.ts_ns, g.gap_start_ns) AS overlap_ns
  FROM candidates g
  JOIN top_ops o
    ON o.run_id = g.run_id AND o.rank = g.rank AND o.pid = g.launch_pid AND o.tid = g.launch_tid AND o.k = g.k
  WHERE o.ts_ns < g.gap_end_ns AND o.end_ns > g.gap_start_ns
),
covered AS (
  SELECT run_id, rank, step, device, gap_start_ns, sum(overlap_ns) AS covered_ns
  FROM overlapping GROUP BY ALL
),
by_op AS (
  SELECT run_id, rank, step, device, op, sum(overlap_ns)::BIGINT AS gap_ns, count(*) AS gaps
  FROM overlapping GROUP BY ALL
  UNION ALL
  SELECT g.run_id, g.rank, g.step, g.device, '(no op)' AS op,
         sum(g.gap_ns - coalesce(c.covered_ns, 0))::BIGINT AS gap_ns,
         count(*) FILTER (WHERE g.gap_ns > coalesce(c.covered_ns, 0)) AS gaps
  FROM gaps g
  LEFT JOIN covered c USING (run_id, rank, step, device, gap_start_ns)
  GROUP BY ALL
),
cast_names AS (  -- the pattern is a column, so match each distinct op name once
  SELECT o.op, regexp_matches(o.op, c.family) AS is_cast FROM (SELECT DISTINCT op FROM by_op) o CROSS JOIN _cast_ops c
)
SELECT b.*, n.is_cast FROM by_op b JOIN cast_names n USING (op) WHERE b.gap_ns > 0
ORDER BY run_id, rank, step, device, gap_ns DESC
