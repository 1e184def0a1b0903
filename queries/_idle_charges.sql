-- _idle_charges: each piece of _idle_pieces with the host call it is charged to.
-- Requires: _idle_pieces, _host_marks
-- Definition: idle_sites' rule, piece by piece (idle_sites sums these per call). A piece of a cause
-- that holds the host (host_sync, allocator, algorithm_search, input_pipeline) is charged to the call
-- of that cause holding it (for a gap explained whole, at the instant it began): for host_sync and
-- allocator the innermost such call, for algorithm_search and input_pipeline the outermost. Other
-- pieces are charged to the cast op they fall in (cast_overhead) or to the top-level op they fall in
-- (launch_overhead, and time between ops or not attributed, which has no op). `frame` is the innermost
-- Python frame of the user's code around a held call (files outside torch, numpy and site-packages;
-- only in traces with Python stacks).
-- Reads: _idle_pieces, _host_marks, events(kind, name, pid, tid, ts_ns, dur_ns, event_id, depth).
-- Columns:
--   run_id       VARCHAR  run id
--   rank         BIGINT   rank
--   step         INTEGER  window's step
--   device       INTEGER  GPU index
--   gap_id       BIGINT   the gap (as numbered in _idle_pieces)
--   piece_start  BIGINT   start of the piece, ns
--   piece_end    BIGINT   end of the piece, ns
--   ns           BIGINT   its length, ns
--   pid          BIGINT   process of the thread that explains it (NULL: none)
--   tid          BIGINT   that thread
--   held_at      BIGINT   for a gap explained whole: an instant inside the call that held the host, ns
--   cause        VARCHAR  the cause (see idle_causes)
--   site_id      BIGINT   the host event the piece is charged to (NULL: none)
--   frame        VARCHAR  innermost frame of the user's Python code around it (NULL: not recorded or none)
WITH held AS (  -- pieces of the causes that hold the host, charged to the call holding it then
  SELECT p.*, m.event_id AS site_id
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
                 AND f.ts_ns <= coalesce(h.held_at, h.piece_start) AND f.end_ns > coalesce(h.held_at, h.piece_start)
               ORDER BY f.ts_ns DESC LIMIT 1) AS frame
  FROM held h
),
loose AS (  -- the other pieces of a thread
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
in_cast AS (  -- cast pieces with the cast op they fall in (no other piece is charged to one)
  SELECT l.*, CASE WHEN l.piece_start < c.end_ns THEN c.event_id END AS cast_id
  FROM (SELECT * FROM loose WHERE cause = 'cast_overhead') l
  ASOF LEFT JOIN cast_ops c
    ON c.run_id = l.run_id AND c.rank = l.rank AND c.pid = l.pid AND c.tid = l.tid AND l.piece_start >= c.ts_ns
),
in_top AS (
  SELECT l.*, CASE WHEN l.piece_start < o.end_ns THEN o.event_id END AS top_id
  FROM (SELECT * FROM in_cast UNION ALL SELECT *, NULL::BIGINT AS cast_id FROM loose WHERE cause <> 'cast_overhead') l
  ASOF LEFT JOIN top_ops o
    ON o.run_id = l.run_id AND o.rank = l.rank AND o.pid = l.pid AND o.tid = l.tid AND l.piece_start >= o.ts_ns
)
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause, site_id, frame
FROM held_framed
UNION ALL
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause,
       coalesce(cast_id, top_id) AS site_id, NULL AS frame
FROM in_top
UNION ALL
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause,
       NULL::BIGINT AS site_id, NULL AS frame
FROM _idle_pieces
WHERE pid IS NULL AND NOT list_contains(['host_sync', 'allocator', 'algorithm_search', 'input_pipeline'], cause)
