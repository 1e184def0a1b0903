-- idle_sites: where each cause's idle time was spent: the call, the op around it and the user's code.
-- Requires: _idle_pieces, _host_marks
-- Definition: each piece of _idle_pieces named by the host call it is charged to. A piece of a cause
-- that holds the host is charged to the call of that cause holding it (for a gap explained whole, at the
-- instant it began): for host_sync and allocator the innermost such call (cudaStreamSynchronize,
-- cudaFree), for algorithm_search and input_pipeline the outermost (the searching op, the DataLoader
-- range; none for host time outside ops at the step boundary). Other pieces are charged to the cast op
-- they fall in (cast_overhead) or to the top-level op they fall in (launch_overhead, and time between
-- ops, which has no op). `op` is the innermost op around the call (for a runtime call, the op
-- that made it), `top_op` the top-level op around it, and `frame` the innermost Python frame of the
-- user's code around it (files outside torch, numpy and site-packages; only in traces with Python stacks,
-- and only for held calls).
-- Reads: _idle_pieces, _host_marks, events(kind, name, pid, tid, ts_ns, dur_ns, event_id, parent_id, top_op_id, depth).
-- Columns:
--   run_id   VARCHAR  run id
--   rank     BIGINT   rank
--   step     INTEGER  window's step
--   device   INTEGER  GPU index
--   cause    VARCHAR  the cause (see idle_causes)
--   site     VARCHAR  the call the time is charged to (NULL: between calls)
--   op       VARCHAR  innermost op around that call (NULL: none)
--   top_op   VARCHAR  top-level op around it (NULL: none)
--   frame    VARCHAR  innermost frame of the user's Python code around it (NULL: not recorded or none)
--   calls    BIGINT   distinct calls charged
--   idle_ns  BIGINT   idle time charged, ns
WITH held AS (  -- pieces of the causes that hold the host, charged to the call holding it then
  SELECT p.run_id, p.rank, p.step, p.device, p.cause, p.ns, p.pid, p.tid, p.gap_id, p.piece_start,
         coalesce(p.held_at, p.piece_start) AS held_at, m.event_id AS site_id
  FROM _idle_pieces p
  LEFT JOIN _host_marks m
    ON m.run_id = p.run_id AND m.rank = p.rank AND m.pid = p.pid AND m.tid = p.tid AND m.cause = p.cause
   AND m.ts_ns <= coalesce(p.held_at, p.piece_start) AND m.end_ns > coalesce(p.held_at, p.piece_start)
  WHERE list_contains(['host_sync', 'allocator', 'algorithm_search', 'input_pipeline'], p.cause)
  QUALIFY row_number() OVER (
    PARTITION BY p.run_id, p.rank, p.gap_id, p.piece_start
    ORDER BY CASE WHEN p.cause IN ('host_sync', 'allocator') THEN -m.ts_ns ELSE m.ts_ns END, m.event_id) = 1
),
user_frames AS (  -- Python frames of the user's own code
  SELECT run_id, rank, pid, tid, name, ts_ns, ts_ns + dur_ns AS end_ns
  FROM events
  WHERE kind = 'python'
    AND NOT regexp_matches(name, '^<|(^|/)(torch|numpy|site-packages|dist-packages|threading|runpy|typing)[/.]')
),
held_framed AS (
  SELECT h.*, (SELECT f.name FROM user_frames f
               WHERE f.run_id = h.run_id AND f.rank = h.rank AND f.pid = h.pid AND f.tid = h.tid
                 AND f.ts_ns <= h.held_at AND f.end_ns > h.held_at
               ORDER BY f.ts_ns DESC LIMIT 1) AS frame
  FROM held h
),
loose AS (  -- the other pieces
  SELECT * FROM _idle_pieces
  WHERE pid IS NOT NULL AND NOT list_contains(['host_sync', 'allocator', 'algorithm_search', 'input_pipeline'], cause)
),
top_ops AS (
  SELECT run_id, rank, pid, tid, event_id, ts_ns, ts_ns + dur_ns AS end_ns
  FROM events WHERE kind = 'op' AND depth = 0
),
cast_ops AS (
  SELECT run_id, rank, pid, tid, event_id, ts_ns, end_ns FROM _host_marks WHERE cause = 'cast_overhead'
),
in_top AS (
  SELECT l.*, CASE WHEN l.piece_start < o.end_ns THEN o.event_id END AS top_id
  FROM loose l
  ASOF LEFT JOIN top_ops o
    ON o.run_id = l.run_id AND o.rank = l.rank AND o.pid = l.pid AND o.tid = l.tid AND l.piece_start >= o.ts_ns
),
in_cast AS (
  SELECT l.*, CASE WHEN l.cause = 'cast_overhead' AND l.piece_start < c.end_ns THEN c.event_id END AS cast_id
  FROM in_top l
  ASOF LEFT JOIN cast_ops c
    ON c.run_id = l.run_id AND c.rank = l.rank AND c.pid = l.pid AND c.tid = l.tid AND l.piece_start >= c.ts_ns
),
charged AS (
  SELECT run_id, rank, step, device, cause, ns, site_id, frame FROM held_framed
  UNION ALL
  SELECT run_id, rank, step, device, cause, ns, coalesce(cast_id, top_id) AS site_id, NULL AS frame FROM in_cast
  UNION ALL
  SELECT run_id, rank, step, device, cause, ns, NULL AS site_id, NULL AS frame
  FROM _idle_pieces
  WHERE pid IS NULL AND NOT list_contains(['host_sync', 'allocator', 'algorithm_search', 'input_pipeline'], cause)
)
SELECT c.run_id, c.rank, c.step, c.device, c.cause, s.name AS site,
       CASE WHEN s.kind = 'runtime' THEN p.name ELSE s.name END AS op, t.name AS top_op, c.frame,
       count(DISTINCT c.site_id) AS calls, sum(c.ns)::BIGINT AS idle_ns
FROM charged c
LEFT JOIN events s ON s.run_id = c.run_id AND s.rank = c.rank AND s.event_id = c.site_id
LEFT JOIN events p ON p.run_id = s.run_id AND p.rank = s.rank AND p.event_id = s.parent_id
LEFT JOIN events t ON t.run_id = s.run_id AND t.rank = s.rank AND t.event_id = s.top_op_id
GROUP BY ALL
ORDER BY c.run_id, c.rank, c.step, c.device, idle_ns DESC
