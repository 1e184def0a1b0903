-- _host_marks: host calls that tell what a thread was doing, each with the idle cause it stands for.
-- Requires: _cast_ops, _search_calls
-- Definition: every host event of a thread with a duration that can explain GPU idle time, labelled:
-- 'algorithm_search' an op call that searched for an algorithm (see _search_calls);
-- 'input_pipeline' a data-loading range (PyTorch `enumerate(DataLoader)#...`, a Dataset's `__getitem__`
-- or `collate` frame, Paddle's `Dataloader`/`DataLoader` ranges) or an op that copied pageable host memory to
-- the device; 'host_sync' a runtime call that blocks the host until the device is done (stream, device
-- or event synchronise, a synchronous memcpy); 'allocator' a device memory allocation or release
-- (cudaMalloc/cudaFree and their driver and HIP forms), and the op that made such a call for its whole
-- length (aten::_local_scalar_dense around a stream synchronise, aten::empty around a cudaMalloc);
-- 'cast_overhead' an op of the cast family (see
-- _cast_ops); 'launch_overhead' any other op, stage or runtime call. Where marks nest, the cause with
-- the higher `priority` wins for the time they share (a sync inside a search is search).
-- Reads: events(kind, name, category, pid, tid, ts_ns, dur_ns, event_id, op_id, launch_id), _cast_ops,
-- _search_calls.
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   pid       BIGINT   host process
--   tid       BIGINT   host thread
--   event_id  BIGINT   the host event
--   ts_ns     BIGINT   start, ns
--   end_ns    BIGINT   end, ns
--   cause     VARCHAR  algorithm_search, input_pipeline, host_sync, allocator, cast_overhead or launch_overhead
--   priority  INTEGER  which cause wins where marks overlap (higher wins)
WITH names AS (  -- the patterns are columns, so each distinct name is matched once, not every call
  SELECT n.kind, n.name,
         CASE
           WHEN n.kind IN ('annotation', 'python', 'op', 'op_inner', 'other')
            AND regexp_matches(n.name, '(?i)dataloader|__getitem__|collate|_next_data|dataset\.py')
             THEN 'input_pipeline'
           WHEN n.kind = 'runtime' AND regexp_matches(n.name,
             '^(cuda|cu|hip)(Stream|Device|Ctx|Event)Synchroni[sz]e|^cudaMemcpy(2D|3D)?(ToSymbol|FromSymbol)?(_v\d+)?$|^cuMemcpy[DH]to[DH](_v\d+)?$|^hipMemcpy$')
             THEN 'host_sync'
           WHEN n.kind = 'runtime' AND regexp_matches(n.name,
             '^(cuda|hip)(Malloc|Free)(Host|Managed|Pitch|Array)?(_v\d+)?$|^cudaHostAlloc(_v\d+)?$|^cuMem(Alloc|Free|Create|Release|Map|Unmap)')
             THEN 'allocator'
           WHEN n.kind IN ('op', 'op_inner') AND regexp_matches(n.name, c.family) THEN 'cast_overhead'
           WHEN n.kind IN ('op', 'op_inner', 'runtime') THEN 'launch_overhead'
         END AS cause
  FROM (SELECT DISTINCT kind, name FROM events
        WHERE kind IN ('op', 'op_inner', 'runtime', 'annotation', 'python', 'other')) n
  CROSS JOIN _cast_ops c
),
pageable_copies AS (  -- ops that copied pageable host memory to the device (a blocking copy)
  SELECT DISTINCT g.run_id, g.rank, g.op_id AS event_id
  FROM events g
  WHERE g.kind = 'memcpy' AND g.op_id IS NOT NULL
    AND regexp_matches(g.name, '(?i)htod.*pageable|pageable.*device')
),
held_calls AS (  -- the op that made a synchronising or allocating call holds the host for it too
  SELECT DISTINCT e.run_id, e.rank, e.parent_id AS event_id, n.cause
  FROM events e JOIN names n ON n.kind = e.kind AND n.name = e.name
  WHERE e.kind = 'runtime' AND n.cause IN ('host_sync', 'allocator') AND e.parent_id IS NOT NULL
),
marked AS (
  SELECT e.run_id, e.rank, e.pid, e.tid, e.event_id, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
         CASE WHEN s.event_id IS NOT NULL THEN 'algorithm_search'
              WHEN p.event_id IS NOT NULL THEN 'input_pipeline'
              WHEN h.event_id IS NOT NULL AND n.cause <> 'input_pipeline' THEN h.cause
              ELSE n.cause END AS cause
  FROM events e
  JOIN names n ON n.kind = e.kind AND n.name = e.name
  LEFT JOIN _search_calls s ON s.run_id = e.run_id AND s.rank = e.rank AND s.event_id = e.event_id
  LEFT JOIN pageable_copies p ON p.run_id = e.run_id AND p.rank = e.rank AND p.event_id = e.event_id
  LEFT JOIN (SELECT run_id, rank, event_id, min(cause) AS cause FROM held_calls GROUP BY ALL) h
    ON h.run_id = e.run_id AND h.rank = e.rank AND h.event_id = e.event_id
  WHERE e.dur_ns > 0 AND e.pid IS NOT NULL AND e.tid IS NOT NULL
)
SELECT run_id, rank, pid, tid, event_id, ts_ns, end_ns, cause,
       CASE cause WHEN 'algorithm_search' THEN 6 WHEN 'input_pipeline' THEN 5 WHEN 'host_sync' THEN 4
                  WHEN 'allocator' THEN 4 WHEN 'cast_overhead' THEN 3 ELSE 2 END AS priority
FROM marked
WHERE cause IS NOT NULL
