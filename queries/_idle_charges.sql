-- _idle_charges: each piece of _idle_pieces with the host call it is charged to.
-- Requires: _idle_pieces, _host_marks
-- Definition: idle_sites' rule, piece by piece (idle_sites sums these per call). A piece of a cause
-- that holds the host (host_sync, allocator, algorithm_search, input_pipeline) is charged to the call
-- of that cause holding it (for a gap explained whole, at the instant it began): for host_sync and
-- allocator the innermost such call, for algorithm_search and input_pipeline the outermost. Other
-- pieces are charged to the cast op they fall in (cast_overhead) or to the top-level op they fall in
-- (launch_overhead), and those in no op (time between ops or not attributed, a launch from Python) to the
-- top-level annotation they fall in, where one does (a range of the user's or of a library:
-- `Optimizer.step#Adam.step`, an NVTX range that PyTorch did not make; one that no other annotation of its
-- thread encloses); a launch in none of them to the outermost runtime call it lies in (a kernel launched from Python
-- or a compiler's runtime: `cudaLaunchKernel`, `cuLaunchKernel`). `frame` is the innermost
-- Python frame of the user's code around a held call (files outside torch, numpy and site-packages;
-- only in traces with Python stacks).
-- Reads: _idle_pieces, _host_marks, events(kind, name, pid, tid, ts_ns, dur_ns, event_id, depth, parent_id).
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
WITH held_pieces AS (  -- pieces of the causes that hold the host, each with the instant its call is found at
  SELECT *, coalesce(held_at, piece_start) AS x
  FROM _idle_pieces
  WHERE holds_host(cause)
),
held_marks AS (
  SELECT run_id, rank, pid, tid, cause, event_id, ts_ns, end_ns
  FROM _host_marks
  WHERE holds_host(cause)
),
-- host_sync and allocator: the innermost call holding the instant (the latest to begin; of those beginning at
-- one instant, the first by id). The calls of a cause that began last at or before it are found by an as-of
-- join; where they are one call that still runs, it is that call (nothing began between), and where none
-- began, there is none. The others (the call found ended: an outer one may hold the instant; or several
-- began at that instant) are looked up among all calls of the cause, as a range join would for every piece
-- (20 k synchronising calls of one thread at 21 copies of a capture: a range join of every piece with all of
-- them took 2.7 s of CPU time)
starts AS (
  SELECT run_id, rank, pid, tid, cause, ts_ns, count(*) AS n, min(event_id) AS event_id, max(end_ns) AS end_ns
  FROM held_marks
  WHERE holds_host_inner(cause)
  GROUP BY ALL
),
latest AS (
  SELECT p.*, s.event_id AS site_id, s.ts_ns IS NULL OR (s.n = 1 AND s.end_ns > p.x) AS found
  FROM (FROM held_pieces WHERE holds_host_inner(cause)) p
  ASOF LEFT JOIN starts s
    ON s.run_id = p.run_id AND s.rank = p.rank AND s.pid = p.pid AND s.tid = p.tid AND s.cause = p.cause
   AND p.x >= s.ts_ns
),
innermost AS (
  SELECT * EXCLUDE (found) FROM latest WHERE found
  UNION ALL
  SELECT p.* EXCLUDE (site_id, found), m.event_id AS site_id
  FROM (FROM latest WHERE NOT found) p
  LEFT JOIN held_marks m
    ON m.run_id = p.run_id AND m.rank = p.rank AND m.pid = p.pid AND m.tid = p.tid AND m.cause = p.cause
   AND m.ts_ns <= p.x AND m.end_ns > p.x
  QUALIFY row_number() OVER (PARTITION BY p.run_id, p.rank, p.gap_id, p.piece_start ORDER BY m.ts_ns DESC, m.event_id) = 1
),
-- algorithm_search and input_pipeline: the outermost call holding the instant (the first to begin; of those
-- beginning at one instant, the first by id). In that order, it is the first call to end after the instant,
-- where that call began at or before it: so of the calls in that order only those that end later than every
-- call before them are looked at, and the as-of join finds the first of them to end after the instant
outer_ends AS (
  SELECT *
  FROM (SELECT *, max(end_ns) OVER (PARTITION BY run_id, rank, pid, tid, cause ORDER BY ts_ns, event_id
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS ended_before
        FROM held_marks
        WHERE holds_host_outer(cause))
  WHERE ended_before IS NULL OR end_ns > ended_before
),
outermost AS (
  SELECT p.*, CASE WHEN o.ts_ns <= p.x THEN o.event_id END AS site_id
  FROM (FROM held_pieces WHERE holds_host_outer(cause)) p
  ASOF LEFT JOIN outer_ends o
    ON o.run_id = p.run_id AND o.rank = p.rank AND o.pid = p.pid AND o.tid = p.tid AND o.cause = p.cause
   AND p.x < o.end_ns
),
held AS (  -- pieces of the causes that hold the host, charged to the call holding it then
  SELECT * EXCLUDE (x) FROM innermost
  UNION ALL
  SELECT * EXCLUDE (x) FROM outermost
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
  WHERE pid IS NOT NULL AND NOT holds_host(cause)
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
),
top_annotations AS (  -- each thread's annotations that no other annotation of the thread encloses (one that
                      -- begins where all before it have ended: in start order, the longest first)
  SELECT run_id, rank, pid, tid, event_id, ts_ns, end_ns
  FROM (SELECT run_id, rank, pid, tid, event_id, ts_ns, ts_ns + dur_ns AS end_ns,
               max(ts_ns + dur_ns) OVER (PARTITION BY run_id, rank, pid, tid ORDER BY ts_ns, dur_ns DESC, event_id
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
        FROM events WHERE kind = 'annotation' AND pid IS NOT NULL AND tid IS NOT NULL)
  WHERE reach IS NULL OR ts_ns >= reach
),
in_annotation AS (  -- pieces in no op: the top-level annotation they fall in
  SELECT *, NULL::BIGINT AS annotation_id FROM in_top WHERE top_id IS NOT NULL OR cast_id IS NOT NULL
  UNION ALL
  SELECT l.*, CASE WHEN l.piece_start < a.end_ns THEN a.event_id END AS annotation_id
  FROM (SELECT * FROM in_top WHERE top_id IS NULL AND cast_id IS NULL) l
  ASOF LEFT JOIN top_annotations a
    ON a.run_id = l.run_id AND a.rank = l.rank AND a.pid = l.pid AND a.tid = l.tid AND l.piece_start >= a.ts_ns
),
unplaced AS (  -- launch pieces in no op, cast op or annotation: each lies in a runtime call that no op encloses
  SELECT * FROM in_annotation WHERE cause = 'launch_overhead' AND coalesce(cast_id, top_id, annotation_id) IS NULL
),
runtime_calls AS (  -- the runtime calls of their threads made in no op (a piece in no op lies in no other) that
                   -- no other such call encloses (a driver call inside a runtime call: the outer one is named),
                   -- as top_annotations finds its ranges
  SELECT run_id, rank, pid, tid, event_id, ts_ns, end_ns
  FROM (SELECT r.run_id, r.rank, r.pid, r.tid, r.event_id, r.ts_ns, r.ts_ns + r.dur_ns AS end_ns,
               max(r.ts_ns + r.dur_ns) OVER (PARTITION BY r.run_id, r.rank, r.pid, r.tid
                                             ORDER BY r.ts_ns, r.dur_ns DESC, r.event_id
                                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
        FROM events r
        SEMI JOIN (SELECT DISTINCT run_id, rank, pid, tid FROM unplaced) t
          ON t.run_id = r.run_id AND t.rank = r.rank AND t.pid = r.pid AND t.tid = r.tid
        WHERE r.kind = 'runtime' AND r.parent_id IS NULL)
  WHERE reach IS NULL OR ts_ns >= reach
),
in_runtime AS (  -- those pieces with the runtime call they lie in (these calls do not overlap: the last to begin at
                 -- or before the piece)
  SELECT l.*, CASE WHEN l.piece_start < r.end_ns THEN r.event_id END AS runtime_id
  FROM unplaced l
  ASOF LEFT JOIN runtime_calls r
    ON r.run_id = l.run_id AND r.rank = l.rank AND r.pid = l.pid AND r.tid = l.tid AND l.piece_start >= r.ts_ns
)
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause, site_id, frame
FROM held_framed
UNION ALL
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause,
       coalesce(cast_id, top_id, annotation_id) AS site_id, NULL AS frame
FROM in_annotation
WHERE cause <> 'launch_overhead' OR coalesce(cast_id, top_id, annotation_id) IS NOT NULL
UNION ALL
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause,
       runtime_id AS site_id, NULL AS frame
FROM in_runtime
UNION ALL
SELECT run_id, rank, step, device, gap_id, piece_start, piece_end, ns, pid, tid, held_at, cause,
       NULL::BIGINT AS site_id, NULL AS frame
FROM _idle_pieces
WHERE pid IS NULL AND NOT holds_host(cause)
