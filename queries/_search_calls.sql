-- _search_calls: op calls that searched for an algorithm (cuDNN/cuBLAS autotuning, exhaustive search).
-- Requires: _call_causes
-- Definition: a call of an op that takes at least 1 ms and 20 times a typical call of the same op name
-- (its lower quartile: where most calls of an op search, its median is a search too), launches at
-- least twice as many GPU kernels as a typical call and 3 more, and waits for
-- the device inside (a stream, device or event synchronise, or a cudaMemGetInfo) while doing so: the
-- signature of trying candidate algorithms on the first call with a new input shape. Of nested calls
-- that all qualify (aten::conv1d > ... > aten::cudnn_convolution) the innermost is kept. new_shape
-- says whether no earlier call of the op in the trace had the same input shapes (NULL without shapes).
-- Reads: events(kind, name, pid, tid, ts_ns, dur_ns, event_id, step, input_shapes, launch_id), _call_causes.
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   event_id        BIGINT   the op call
--   name            VARCHAR  op name
--   step            INTEGER  host step of the call
--   input_shapes    VARCHAR  its input shapes (JSON), where recorded
--   new_shape       BOOLEAN  the first call of this op with these shapes in the trace
--   dur_ns          BIGINT   the call's duration, ns
--   typical_ns      DOUBLE   lower quartile of this op's call durations, ns
--   kernels         BIGINT   GPU work launched inside the call
--   typical_kernels DOUBLE   lower quartile of the GPU work launched inside this op's calls
--   syncs           BIGINT   synchronising runtime calls inside the call
WITH slow AS (  -- the ops that have a call far slower than their typical call (the lower quartile of their calls)
  SELECT run_id, rank, name, quantile_cont(dur_ns, 0.25) AS typical_ns
  FROM events
  WHERE kind = 'op'
  GROUP BY run_id, rank, name
  HAVING max(dur_ns) >= greatest(1000000, 20 * quantile_cont(dur_ns, 0.25))
),
op_calls AS (  -- the calls of those ops, each with whether it is long enough to be a search
  SELECT e.run_id, e.rank, e.event_id, e.name, e.step, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
         e.dur_ns, e.input_shapes, s.typical_ns, e.dur_ns >= greatest(1000000, 20 * s.typical_ns) AS long_enough
  FROM events e
  JOIN slow s ON s.run_id = e.run_id AND s.rank = e.rank AND s.name IS NOT DISTINCT FROM e.name
  WHERE e.kind = 'op'
),
waiting AS (  -- the runtime calls that wait for the device: a stream, device or event synchronise, a cudaMemGetInfo
  SELECT kind, name FROM _call_causes WHERE kind = 'runtime' AND (cause = 'host_sync' OR name LIKE '%MemGetInfo%')
),
waits AS MATERIALIZED (  -- their calls (made apart, so that they are not joined after the op calls below)
  SELECT r.run_id, r.rank, r.pid, r.tid, r.ts_ns
  FROM events r SEMI JOIN waiting k ON k.kind = r.kind AND k.name = r.name
  WHERE r.kind = 'runtime'
),
searching AS (  -- the ops with a long call that waited inside: only their calls can be searches, so only theirs
                -- are counted below (most runs have none, and nothing is sorted or counted)
  SELECT DISTINCT c.run_id, c.rank, c.name
  FROM op_calls c
  JOIN waits w ON w.run_id = c.run_id AND w.rank = c.rank AND w.pid = c.pid AND w.tid = c.tid
   AND w.ts_ns >= c.ts_ns AND w.ts_ns < c.end_ns
  WHERE c.long_enough
),
calls AS (  -- every call of those ops (their quartile an aggregate joined back, not a window over every op call
            -- carrying its columns: at 21 copies of a capture with shapes, 1.9 M calls and their shapes
            -- sorted, spilling 0.4 GB under the ingest's memory limit)
  FROM op_calls c SEMI JOIN searching f ON f.run_id = c.run_id AND f.rank = c.rank AND f.name IS NOT DISTINCT FROM c.name
),
span AS MATERIALIZED (  -- each thread's probed span: from its first call of those ops (from its first host call
                        -- where one has no end) to the last instant looked up for one. The counts inside a
                        -- call are differences of counts up to two instants within the span, the same over
                        -- its host calls alone: a thread's others (most of them, where the ops cover a small
                        -- part of a capture) are neither sorted nor counted. And a number for the thread,
                        -- which the counts' window and lookups key on (one integer instead of the run, rank,
                        -- process and thread); made once, so that every reader sees the same numbers.
  SELECT run_id, rank, pid, tid, CASE WHEN bool_or(end_ns IS NULL) THEN NULL ELSE min(ts_ns) END AS lo,
         max(greatest(ts_ns, end_ns)) AS hi, row_number() OVER () AS thread
  FROM calls
  GROUP BY run_id, rank, pid, tid
),
host_calls AS (
  SELECT s.thread, r.ts_ns,
         EXISTS (SELECT 1 FROM events g WHERE g.run_id = r.run_id AND g.rank = r.rank AND g.launch_id = r.event_id)
           AS launch,
         k.name IS NOT NULL AS wait
  FROM events r
  JOIN span s ON s.run_id = r.run_id AND s.rank = r.rank AND s.pid = r.pid AND s.tid = r.tid
  LEFT JOIN waiting k ON k.kind = r.kind AND k.name = r.name
  WHERE r.kind = 'runtime' AND (s.lo IS NULL OR r.ts_ns >= s.lo) AND r.ts_ns < s.hi
),
host AS (  -- launches and waits on the threads, to be counted inside calls (other calls count for neither:
           -- left out, they leave the counts at every instant as they are, in a third of the rows)
  SELECT * FROM host_calls WHERE launch OR wait
),
counted AS (  -- per thread and instant: the launches and waits on it up to that instant, inclusive
  SELECT thread, ts_ns,
         sum(count(*) FILTER (WHERE launch)) OVER upto AS launches,
         sum(count(*) FILTER (WHERE wait)) OVER upto AS waits
  FROM host
  GROUP BY thread, ts_ns
  WINDOW upto AS (PARTITION BY thread ORDER BY ts_ns ROWS UNBOUNDED PRECEDING)
),
inside AS (  -- per call of those ops: launches and waits within it on its thread (those before its end less
             -- those before its start: two as-of lookups, not a range join of every call with every launch)
  SELECT c.run_id, c.rank, c.event_id,
         (coalesce(e.launches, 0) - coalesce(b.launches, 0))::BIGINT AS kernels,
         (coalesce(e.waits, 0) - coalesce(b.waits, 0))::BIGINT AS syncs
  FROM calls c
  LEFT JOIN span s ON s.run_id = c.run_id AND s.rank = c.rank AND s.pid = c.pid AND s.tid = c.tid
  ASOF LEFT JOIN counted e ON e.thread = s.thread AND c.end_ns > e.ts_ns
  ASOF LEFT JOIN counted b ON b.thread = s.thread AND c.ts_ns > b.ts_ns
),
judged AS (
  SELECT c.*, i.kernels, i.syncs,
         quantile_cont(i.kernels, 0.25) OVER (PARTITION BY c.run_id, c.rank, c.name) AS typical_kernels
  FROM calls c JOIN inside i USING (run_id, rank, event_id)
),
searches AS (
  SELECT * FROM judged
  WHERE long_enough AND syncs > 0
    AND kernels >= 2 * typical_kernels + 3
),
enclosing AS (  -- the searches with another one inside them on their thread: a join, then an anti join on the
                -- call below. Not a NOT EXISTS correlated on these conditions: DuckDB 1 (which Python 3.10
                -- installs) planned that with the <> as the anti join's only condition and kept every search
  SELECT DISTINCT o.run_id, o.rank, o.event_id
  FROM searches o
  JOIN searches i ON i.run_id = o.run_id AND i.rank = o.rank AND i.pid = o.pid AND i.tid = o.tid
   AND i.event_id <> o.event_id AND i.ts_ns >= o.ts_ns AND i.end_ns <= o.end_ns
)
SELECT s.run_id, s.rank, s.event_id, s.name, s.step, s.input_shapes,
       CASE WHEN s.input_shapes IS NULL THEN NULL ELSE NOT EXISTS (  -- looked up for the searches only
         SELECT 1 FROM events o
         WHERE o.kind = 'op' AND o.run_id = s.run_id AND o.rank = s.rank AND o.name IS NOT DISTINCT FROM s.name
           AND o.input_shapes = s.input_shapes
           AND (o.ts_ns < s.ts_ns OR (o.ts_ns = s.ts_ns AND o.event_id < s.event_id))) END AS new_shape,
       s.dur_ns, s.typical_ns, s.kernels, s.typical_kernels, s.syncs
FROM searches s  -- keep the innermost: no qualifying call inside this one
ANTI JOIN enclosing USING (run_id, rank, event_id)
