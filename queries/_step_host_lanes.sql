-- _step_host_lanes: the top-level ops of the threads that launched each run's representative step.
-- Requires: _typical_step, _gpu_work
-- Definition: the host threads that launched at least 5 % of the GPU work of the window of _typical_step
-- (at most four, most launches first; Kineto's forward and autograd threads both do); in a window without
-- launched GPU work, the threads with top-level ops in it, by their op time. Their top-level ops (kind
-- 'op', depth 0) that overlap the window, clipped to it, times from the window's start.
-- Reads: _typical_step, _gpu_work, events(kind, depth, pid, tid, name, ts_ns, dur_ns, event_id).
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   pid       BIGINT   host process
--   tid       BIGINT   host thread
--   name      VARCHAR  the op
--   start_ns  BIGINT   start inside the window, ns from its start
--   end_ns    BIGINT   end inside the window, ns from its start
WITH launches AS (
  SELECT m.run_id, m.rank, l.pid, l.tid, count(*) AS n
  FROM _typical_step m
  JOIN _gpu_work g ON g.run_id = m.run_id AND g.rank = m.rank AND g.step IS NOT DISTINCT FROM m.step
  JOIN events l ON l.run_id = g.run_id AND l.rank = g.rank AND l.event_id = g.launch_id
  GROUP BY ALL
),
op_time AS (  -- runs without launched GPU work in the window: threads by their top-level op time
  SELECT m.run_id, m.rank, e.pid, e.tid,
         sum(least(e.ts_ns + e.dur_ns, m.win_end) - greatest(e.ts_ns, m.win_start)) AS n
  FROM _typical_step m
  JOIN events e ON e.run_id = m.run_id AND e.rank = m.rank AND e.kind = 'op' AND e.depth = 0
   AND e.ts_ns < m.win_end AND e.ts_ns + e.dur_ns > m.win_start
  WHERE NOT EXISTS (SELECT 1 FROM launches x WHERE x.run_id = m.run_id)
  GROUP BY ALL
),
threads AS (
  SELECT * FROM (SELECT * FROM launches UNION ALL SELECT * FROM op_time)
  QUALIFY n >= 0.05 * sum(n) OVER (PARTITION BY run_id)
      AND row_number() OVER (PARTITION BY run_id ORDER BY n DESC, pid, tid) <= 4
)
SELECT m.run_id, m.rank, e.pid, e.tid, e.name,
       greatest(e.ts_ns, m.win_start) - m.win_start AS start_ns,
       least(e.ts_ns + e.dur_ns, m.win_end) - m.win_start AS end_ns
FROM _typical_step m
JOIN threads t ON t.run_id = m.run_id
JOIN events e ON e.run_id = m.run_id AND e.rank = m.rank AND e.pid = t.pid AND e.tid = t.tid
 AND e.kind = 'op' AND e.depth = 0 AND e.ts_ns < m.win_end AND e.ts_ns + e.dur_ns > m.win_start
ORDER BY m.run_id, e.pid, e.tid, e.ts_ns
