-- _host_marks: host calls that tell what a thread was doing, each with the idle cause it stands for.
-- Requires: _call_causes, _search_calls, _pageable_copies, _device_copies
-- Definition: every host event of a thread with a duration that can explain GPU idle time, with the cause
-- it stands for: 'algorithm_search' for an op call that searched for an algorithm (see _search_calls);
-- 'input_pipeline' for an op that copied pageable host memory to the device (see _pageable_copies);
-- 'host_sync' or 'allocator' for the op that made a synchronising or allocating runtime call, for its
-- whole length (aten::_local_scalar_dense around a stream synchronise, aten::empty around a cudaMalloc);
-- otherwise the cause of the event's name (see _call_causes: data-loading ranges, sync and allocation
-- calls, cast ops, any other op or runtime call), except that a cast-family op that moved a tensor
-- between host and device (_device_copies) is an op like any other. Where marks nest, the cause with the
-- higher `priority` wins for the time they share (a sync inside a search is search; _idle_pieces reads it).
-- Reads: events(kind, name, pid, tid, ts_ns, dur_ns, event_id, parent_id), _call_causes, _search_calls,
-- _pageable_copies, _device_copies.
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   pid       BIGINT   host process
--   tid       BIGINT   host thread
--   event_id  BIGINT   the host event
--   parent_id BIGINT   the event it is nested in (events.parent_id; NULL: none)
--   ts_ns     BIGINT   start, ns
--   end_ns    BIGINT   end, ns
--   cause     VARCHAR  algorithm_search, input_pipeline, host_sync, allocator, cast_overhead or launch_overhead
--   priority  INTEGER  which cause wins where marks overlap, higher winning: 6 algorithm_search, 5 input_pipeline, 4 host_sync, 3 allocator, 2 cast_overhead, 1 launch_overhead
WITH pageable_copies AS (  -- ops that copied pageable host memory to the device (a blocking copy)
  SELECT DISTINCT run_id, rank, op_id AS event_id FROM _pageable_copies WHERE op_id IS NOT NULL
),
held_calls AS (  -- the op that made a synchronising or allocating call holds the host for it too
  SELECT DISTINCT e.run_id, e.rank, e.parent_id AS event_id, n.cause
  FROM events e JOIN _call_causes n ON n.kind = e.kind AND n.name = e.name
  WHERE e.kind = 'runtime' AND holds_host_inner(n.cause) AND e.parent_id IS NOT NULL
),
marked AS (
  SELECT e.run_id, e.rank, e.pid, e.tid, e.event_id, e.parent_id, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
         CASE WHEN s.event_id IS NOT NULL THEN 'algorithm_search'
              WHEN p.event_id IS NOT NULL THEN 'input_pipeline'
              WHEN h.event_id IS NOT NULL AND n.cause <> 'input_pipeline' THEN h.cause
              WHEN d.event_id IS NOT NULL AND n.cause = 'cast_overhead' THEN 'launch_overhead'
              ELSE n.cause END AS cause
  FROM events e
  JOIN _call_causes n ON n.kind = e.kind AND n.name = e.name
  LEFT JOIN _search_calls s ON s.run_id = e.run_id AND s.rank = e.rank AND s.event_id = e.event_id
  LEFT JOIN pageable_copies p ON p.run_id = e.run_id AND p.rank = e.rank AND p.event_id = e.event_id
  LEFT JOIN (SELECT run_id, rank, event_id, min(cause) AS cause FROM held_calls GROUP BY ALL) h
    ON h.run_id = e.run_id AND h.rank = e.rank AND h.event_id = e.event_id
  LEFT JOIN _device_copies d ON d.run_id = e.run_id AND d.rank = e.rank AND d.event_id = e.event_id
  WHERE e.dur_ns > 0 AND e.pid IS NOT NULL AND e.tid IS NOT NULL
)
SELECT run_id, rank, pid, tid, event_id, parent_id, ts_ns, end_ns, cause,
       CASE cause WHEN 'algorithm_search' THEN 6 WHEN 'input_pipeline' THEN 5 WHEN 'host_sync' THEN 4
                  WHEN 'allocator' THEN 3 WHEN 'cast_overhead' THEN 2 ELSE 1 END AS priority
FROM marked
WHERE cause IS NOT NULL
