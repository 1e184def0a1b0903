-- _idle_pieces: every idle interval of each device in each window, cut into pieces by cause.
-- Requires: _windows, gpu_gaps, _host_marks
-- Definition: each gap of gpu_gaps is explained by what the host thread that launched the GPU work
-- after it (for the gap at a window's end, the work before it) was doing meanwhile. That thread's time
-- is cut into segments by its marked calls (_host_marks; where marks nest the higher priority wins; a
-- call whose edges could only cut a piece in two of one cause and one call charged cuts nothing, `cutting`);
-- a gap takes the cause of each segment it overlaps, for the overlap. A gap that began while the host
-- was held (host_sync, allocator, algorithm_search, input_pipeline) takes that cause for all of its
-- length: the GPU ran out of work because of it, and the refill after it is its cost too. Where the
-- host had been at least 50 us ahead of the device when it was held, it lost that lead: the host-launch
-- gaps that follow in the window, up to as much idle time as the lead (the gap that crosses it where
-- its middle is within), are that cause's too, since the lead would have covered them. Time in no marked call is
-- 'python_overhead' between the framework ops of the thread's step (a run without steps: between its first
-- and last op), and otherwise 'host_unattributed': at the step boundary (before the step's first op on
-- that thread, or after its last) and on threads without ops nothing recorded says what the host did (a
-- data-loading range or a pageable copy would have been marked). A gap where the GPU had its next work
-- queued but waited (dependency) takes the cause of the call that queued it where that call was held (a
-- pageable copy, a search), else 'unexplained', as does a gap whose next work has no captured launch.
-- The pieces of a window add up to its idle time (gpu_busy.idle_ns).
-- Reads: gpu_gaps, _host_marks, steps, events(kind, pid, tid, ts_ns, dur_ns, event_id, launch_id).
-- Columns:
--   run_id       VARCHAR  run id
--   rank         BIGINT   rank
--   step         INTEGER  window's step
--   device       INTEGER  GPU index
--   gap_id       BIGINT   the gap (numbered within the query's result)
--   piece_start  BIGINT   start of the piece, ns
--   piece_end    BIGINT   end of the piece, ns
--   ns           BIGINT   its length, ns
--   pid          BIGINT   process of the thread that explains it (NULL: none)
--   tid          BIGINT   that thread
--   held_at      BIGINT   for a gap explained whole: an instant inside the call that held the host, ns
--   cause        VARCHAR  launch_overhead, host_sync, input_pipeline, algorithm_search, allocator, cast_overhead, python_overhead, host_unattributed or unexplained
WITH ends AS (  -- the thread that launched the work before each gap at a window's end (a few rows, looked up
               -- apart so that the events' hash tables are built over them, not over the events)
  SELECT DISTINCT g.run_id, g.rank, g.kind, g.prev_event_id, pl.pid, pl.tid  -- (one row per work: a gap
  FROM gpu_gaps g                                                               -- joins at most one)
  JOIN events pw ON pw.run_id = g.run_id AND pw.rank = g.rank AND pw.event_id = g.prev_event_id
  JOIN events pl ON pl.run_id = pw.run_id AND pl.rank = pw.rank AND pl.event_id = pw.launch_id
  WHERE g.kind = 'window_end'
),
gaps AS MATERIALIZED (  -- each gap with the thread that explains it (window end: the thread that launched the work before)
  SELECT g.run_id, g.rank, g.step, g.device, g.kind, g.gap_start_ns, g.gap_end_ns, g.gap_ns,
         coalesce(g.launch_pid, e.pid) AS pid, coalesce(g.launch_tid, e.tid) AS tid, g.launch_ts_ns,
         row_number() OVER () AS gap_id
  FROM gpu_gaps g
  LEFT JOIN ends e ON e.run_id = g.run_id AND e.rank = g.rank AND e.kind = g.kind AND e.prev_event_id = g.prev_event_id
),
probed AS (  -- the stretches of its thread each gap reads: the gap, and for queued work its launch's instant
  SELECT run_id, rank, pid, tid, least(gap_start_ns, gap_end_ns - 1) AS lo, gap_end_ns - 1 AS hi FROM gaps
  UNION ALL
  SELECT run_id, rank, pid, tid, launch_ts_ns AS lo, launch_ts_ns AS hi FROM gaps
  WHERE launch_ts_ns IS NOT NULL AND kind IN ('dependency', 'unknown')
),
span AS MATERIALIZED (  -- each thread's probed span: from its first stretch's start to its last one's end,
                        -- and a number for the thread, which the sorts and joins below key on (one
                        -- integer instead of the run, rank, process and thread: half the CPU time of
                        -- the as-of join at 16 copies of a chrome trace); made once, so that every reader
                        -- sees the same numbers
  SELECT run_id, rank, pid, tid, min(lo) AS lo, max(hi) AS hi, row_number() OVER () AS thread
  FROM probed
  GROUP BY run_id, rank, pid, tid
),
thread_marks AS (  -- the marks of the threads whose time a gap reads, with the thread's number and their cause's
                  -- place in _host_marks' priority, the highest first (0 algorithm_search, 1 input_pipeline,
                  -- 2 host_sync, 3 allocator, 4 cast_overhead, 5 launch_overhead: a byte instead of a string)
  SELECT s.thread, s.lo, s.hi, m.event_id, m.parent_id, m.ts_ns, m.end_ns, (6 - m.priority)::UTINYINT AS c
  FROM _host_marks m
  JOIN span s ON s.run_id = m.run_id AND s.rank = m.rank AND s.pid = m.pid AND s.tid = m.tid
),
spanned AS MATERIALIZED (  -- those within the thread's span
  SELECT thread, event_id, parent_id, ts_ns, end_ns, c FROM thread_marks WHERE end_ns >= lo AND ts_ns <= hi
),
held_islands AS (  -- each such thread's time in calls that hold the host, calls that overlap or touch joined
  SELECT thread, min(ts_ns) AS ts_ns, max(end_ns) AS end_ns
  FROM (SELECT *, sum(opens) OVER (PARTITION BY thread ORDER BY ts_ns, end_ns DESC ROWS UNBOUNDED PRECEDING) AS island
        FROM (SELECT thread, ts_ns, end_ns,
                     CASE WHEN ts_ns <= max(end_ns) OVER (PARTITION BY thread ORDER BY ts_ns, end_ns DESC
                                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                          THEN 0 ELSE 1 END AS opens
              FROM thread_marks
              WHERE c <= 3))  -- algorithm_search, input_pipeline, host_sync, allocator
  GROUP BY thread, island
),
cutting AS (  -- the marks within the spans that can cut a piece. A launch_overhead call inside a launch_overhead or
              -- cast_overhead op of its thread that it is nested in changes neither the cause (the op's is as
              -- high or higher) nor the call a piece is charged to (the top-level op or cast op around both),
              -- so its edges would only cut a piece in two of one cause and call; it is left out, except where
              -- it meets held time, in which every edge still begins the segment a drain's lead is measured
              -- from. At 21 copies of a capture with op ranges: 3.73 M marks in the spans -> 1.85 M, 5.06 M
              -- pieces -> 1.57 M.
  SELECT m.thread, m.ts_ns, m.end_ns, m.c
  FROM spanned m
  LEFT JOIN spanned p
    ON p.thread = m.thread AND p.event_id = m.parent_id AND p.ts_ns <= m.ts_ns AND p.end_ns >= m.end_ns
   AND p.c IN (4, 5)  -- cast_overhead, launch_overhead
  ASOF LEFT JOIN held_islands h ON h.thread = m.thread AND m.end_ns >= h.ts_ns  -- the last held time begun before its end
  WHERE m.c <> 5 OR p.event_id IS NULL OR h.end_ns >= m.ts_ns
),
marks AS (  -- the marks that can change a piece: those within a thread's span that can cut one, and the nearest
            -- one on each side of it (the segment the span starts in begins at the last edge at or before it;
            -- the one it ends in needs an edge after it). Over these marks every probed instant has the same
            -- open marks and the same segment bounds as over all of them. Steps may cover a small part of a
            -- capture: the marks outside them are left out before any sort (a hash join and two
            -- aggregates); within the span, gaps lie among most calls of a launching thread, so the
            -- marks are not narrowed further to those meeting a gap (three as-of joins that cost more than
            -- sorting the few marks they leave out)
  FROM cutting
  UNION ALL
  SELECT thread, unnest(mark)
  FROM (SELECT thread, arg_max({'ts_ns': ts_ns, 'end_ns': end_ns, 'c': c}, end_ns) AS mark
        FROM thread_marks
        WHERE end_ns < lo
        GROUP BY thread
        UNION ALL
        SELECT thread, arg_min({'ts_ns': ts_ns, 'end_ns': end_ns, 'c': c}, ts_ns) AS mark
        FROM thread_marks
        WHERE ts_ns > hi
        GROUP BY thread)
),
edges AS (  -- each mark opens and closes its cause on its thread: plus or minus 1 in its cause's 21 bits of a
            -- 126-bit count (see running)
  SELECT thread, ts_ns AS t, 1::HUGEINT << (21 * c) AS w FROM marks
  UNION ALL
  SELECT thread, end_ns AS t, -(1::HUGEINT << (21 * c)) AS w FROM marks
),
running AS (  -- marks of each cause open after each edge, in time order, and the edge's number on its thread. One
              -- running sum carries the six counts, 21 bits each, in one sort of the edges by time alone: the
              -- edges of one instant come in any order, as only the last of them is read (segments), whose
              -- sum and number count every edge up to that instant, and whose counts are all between 0 and
              -- 2^21 - 1 (a mark closes at or after it opens).
  SELECT thread, t, sum(w) OVER thread_time AS open_marks, lead(t) OVER thread_time AS next_t,
         row_number() OVER thread_time AS k
  FROM edges
  WINDOW thread_time AS (PARTITION BY thread ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
segments AS (  -- the thread's time cut where its open marks change; each piece with the winning cause, as its
               -- number in the priority order (1 algorithm_search ... 7 no_call: named where read, in found
               -- and sliced; a byte instead of a string in the sorts and joins of these millions of rows
               -- at 16 copies of a chrome trace: about a tenth less time for this query), and a number that grows
               -- with time on its thread (its last edge's)
  SELECT thread, t AS seg_start, next_t AS seg_end,
         CASE WHEN open_marks & 2097151 > 0 THEN 1                 -- algorithm_search
              WHEN (open_marks >> 21) & 2097151 > 0 THEN 2         -- input_pipeline
              WHEN (open_marks >> 42) & 2097151 > 0 THEN 3         -- host_sync
              WHEN (open_marks >> 63) & 2097151 > 0 THEN 4         -- allocator
              WHEN (open_marks >> 84) & 2097151 > 0 THEN 5         -- cast_overhead
              WHEN (open_marks >> 105) & 2097151 > 0 THEN 6        -- launch_overhead
              ELSE 7 END::UTINYINT AS cause,                       -- no_call
         k
  FROM running
  WHERE next_t > t  -- the last edge at an instant holds the state after it
),
segment_causes AS (  -- the causes of segments by their number (one row)
  SELECT ['algorithm_search', 'input_pipeline', 'host_sync', 'allocator', 'cast_overhead', 'launch_overhead',
          'no_call'] AS names
),
probes AS (  -- the instants each gap needs its thread's segment at: its start, its launch (read only for a gap
            -- whose work was queued), its last instant; a gap without a thread has none
  SELECT g.gap_id, s.thread, g.at, g.t
  FROM (SELECT gap_id, run_id, rank, pid, tid, 0 AS at, gap_start_ns AS t FROM gaps
        UNION ALL
        SELECT gap_id, run_id, rank, pid, tid, 1 AS at, launch_ts_ns AS t FROM gaps
        WHERE launch_ts_ns IS NOT NULL AND kind IN ('dependency', 'unknown')
        UNION ALL
        SELECT gap_id, run_id, rank, pid, tid, 2 AS at, gap_end_ns - 1 AS t FROM gaps) g
  JOIN span s ON s.run_id = g.run_id AND s.rank = g.rank AND s.pid = g.pid AND s.tid = g.tid
),
found AS (  -- the segment holding each such instant (the last one starting at or before it): one as-of join
  SELECT p.gap_id, p.thread, p.at, s.k, (FROM segment_causes)[s.cause] AS cause, s.seg_start
  FROM probes p
  ASOF JOIN segments s ON s.thread = p.thread AND p.t >= s.seg_start
),
spans AS (  -- the segments holding each gap's start, its launch, and the last one starting before its end
  SELECT g.*, e.thread, f.k AS k_first, f.cause AS start_cause, f.seg_start AS start_seg_start,
         l.cause AS launch_cause, e.k AS k_last
  FROM gaps g
  LEFT JOIN found f ON f.gap_id = g.gap_id AND f.at = 0
  LEFT JOIN found l ON l.gap_id = g.gap_id AND l.at = 1
  LEFT JOIN found e ON e.gap_id = g.gap_id AND e.at = 2
),
drains AS (  -- gaps that began while the host was held, having been at least 50 us ahead of the device:
             -- the lead it lost is the time it was held while the device still had work
  SELECT d.run_id, d.rank, d.step, d.device, d.gap_end_ns AS drain_end, d.start_cause AS drain_cause,
         d.gap_start_ns AS held_at, d.gap_start_ns - d.start_seg_start AS lead_ns
  FROM spans d
  WHERE d.kind = 'host_launch' AND d.gap_start_ns - d.start_seg_start >= 50000
    AND holds_host(d.start_cause)
),
after_drain AS (  -- host-launch gaps after such a drain (before the next), with the gap time before each
  SELECT g.gap_id, g.gap_ns, d.drain_cause, d.held_at, d.lead_ns,
         coalesce(sum(g.gap_ns) OVER (PARTITION BY d.run_id, d.rank, d.device, d.held_at ORDER BY g.gap_start_ns
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before_ns
  FROM spans g
  ASOF JOIN drains d ON d.run_id = g.run_id AND d.rank = g.rank AND d.step IS NOT DISTINCT FROM g.step
   AND d.device = g.device AND g.gap_start_ns >= d.drain_end
  WHERE g.kind = 'host_launch'
),
recovering AS (  -- those the lost lead would have covered (up to the lead, the gap nearest it by its middle)
  SELECT gap_id, drain_cause, held_at FROM after_drain WHERE before_ns + gap_ns / 2 <= lead_ns
),
whole AS (  -- gaps explained whole
  SELECT run_id, rank, step, device, gap_id, gap_ns AS ns, gap_start_ns AS seg_start, gap_end_ns AS seg_end,
         pid, tid,
         CASE WHEN kind IN ('dependency', 'unknown') THEN launch_ts_ns
              WHEN r.gap_id IS NOT NULL AND NOT holds_host(start_cause) THEN r.held_at
              ELSE gap_start_ns END AS held_at,
         CASE WHEN kind IN ('dependency', 'unknown') AND holds_host(launch_cause) THEN launch_cause
              WHEN kind IN ('dependency', 'unknown') OR pid IS NULL THEN 'unexplained'
              WHEN holds_host(start_cause) THEN start_cause
              ELSE r.drain_cause END AS cause
  FROM spans s
  LEFT JOIN recovering r USING (gap_id)
  WHERE kind IN ('dependency', 'unknown') OR pid IS NULL OR holds_host(start_cause) OR r.gap_id IS NOT NULL
),
sliced AS (  -- the other gaps: each overlapped segment's cause, for the overlap
  SELECT g.run_id, g.rank, g.step, g.device, g.gap_id,
         least(s.seg_end, g.gap_end_ns) - greatest(s.seg_start, g.gap_start_ns) AS ns,
         greatest(s.seg_start, g.gap_start_ns) AS seg_start, least(s.seg_end, g.gap_end_ns) AS seg_end,
         g.pid, g.tid, NULL::BIGINT AS held_at, (FROM segment_causes)[s.cause] AS cause
  FROM (SELECT *, unnest(range(coalesce(k_first, 1), coalesce(k_last, 0) + 1)) AS k
        FROM spans s
        WHERE NOT EXISTS (SELECT 1 FROM whole w WHERE w.gap_id = s.gap_id)) g
  JOIN segments s ON s.thread = g.thread AND s.k = g.k
  WHERE s.seg_start < g.gap_end_ns AND s.seg_end > g.gap_start_ns
),
beyond AS (  -- the parts of a gap its thread's segments do not cover (before its first call or after its
             -- last one in the trace): no call
  SELECT g.run_id, g.rank, g.step, g.device, g.gap_id, e.seg_end - e.seg_start AS ns, e.seg_start, e.seg_end,
         g.pid, g.tid, NULL::BIGINT AS held_at, 'no_call' AS cause
  FROM spans g
  LEFT JOIN (SELECT gap_id, min(seg_start) AS first, max(seg_end) AS last FROM sliced GROUP BY gap_id) c USING (gap_id)
  CROSS JOIN LATERAL (
    SELECT g.gap_start_ns AS seg_start, coalesce(c.first, g.gap_end_ns) AS seg_end
    UNION ALL
    SELECT c.last AS seg_start, g.gap_end_ns AS seg_end WHERE c.last IS NOT NULL
  ) e
  WHERE NOT EXISTS (SELECT 1 FROM whole w WHERE w.gap_id = g.gap_id) AND e.seg_end > e.seg_start
),
host_steps AS (  -- each host step's first op start and last op end on each thread (no steps: the run's)
  SELECT s.run_id, s.rank, s.step, e.pid, e.tid, s.ts_ns AS step_start, s.ts_ns + s.dur_ns AS step_end,
         min(e.ts_ns) AS first_op, max(e.ts_ns + e.dur_ns) AS last_op
  FROM steps s
  JOIN events e ON e.run_id = s.run_id AND e.rank = s.rank AND e.kind = 'op'
   AND e.ts_ns >= s.ts_ns AND e.ts_ns < s.ts_ns + s.dur_ns
  GROUP BY ALL
  UNION ALL
  SELECT e.run_id, e.rank, NULL::INTEGER AS step, e.pid, e.tid, min(e.ts_ns) AS step_start,
         max(e.ts_ns + e.dur_ns) AS step_end, min(e.ts_ns) AS first_op, max(e.ts_ns + e.dur_ns) AS last_op
  FROM events e
  WHERE e.kind = 'op' AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = e.run_id AND s.rank = e.rank)
  GROUP BY ALL
),
no_call AS (  -- time in no call, with its host step's ops: the step boundary (input pipeline), or between
              -- ops (Python); only these pieces look their step up
  SELECT p.*, h.first_op, h.last_op
  FROM (SELECT * FROM sliced WHERE cause = 'no_call' UNION ALL SELECT * FROM beyond) p
  ASOF LEFT JOIN host_steps h
    ON h.run_id = p.run_id AND h.rank = p.rank AND h.pid = p.pid AND h.tid = p.tid
   AND coalesce(p.seg_start, 0) >= h.step_start
),
named AS (
  SELECT *, NULL::BIGINT AS first_op, NULL::BIGINT AS last_op FROM whole
  UNION ALL
  SELECT *, NULL::BIGINT AS first_op, NULL::BIGINT AS last_op FROM sliced WHERE cause <> 'no_call'
  UNION ALL
  SELECT * FROM no_call
)
SELECT run_id, rank, step, device, gap_id, seg_start AS piece_start, seg_end AS piece_end, ns::BIGINT AS ns,
       pid, tid, held_at,
       CASE WHEN cause <> 'no_call' THEN cause
            WHEN first_op IS NOT NULL AND seg_end > first_op AND seg_start < last_op THEN 'python_overhead'
            ELSE 'host_unattributed' END AS cause
FROM named
