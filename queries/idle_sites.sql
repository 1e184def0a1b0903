-- idle_sites: where each cause's idle time was spent: the call, the op around it and the user's code.
-- Requires: _idle_charges
-- Definition: the pieces of _idle_charges summed per call they are charged to. A piece of a cause
-- that holds the host is charged to the call of that cause holding it (for a gap explained whole, at the
-- instant it began): for host_sync and allocator the innermost such call (cudaStreamSynchronize,
-- cudaFree), for algorithm_search and input_pipeline the outermost (the searching op, the DataLoader
-- range). Other pieces are charged to the cast op they fall in (cast_overhead) or to the top-level op
-- they fall in (launch_overhead), and those in no op (time between ops or not attributed, a launch from
-- Python) to the top-level annotation they fall in, where one does (`Optimizer.step#Adam.step`, a user's
-- NVTX range), and a launch in none of them to the runtime call it lies in (`cudaLaunchKernel` called
-- from Python or a compiler's runtime). `op` is the
-- innermost op around the call (for a runtime call, the op that made it), `top_op` the top-level op
-- around it, and `frame` the innermost Python frame of the user's code around it (files outside torch,
-- numpy and site-packages; only in traces with Python stacks, and only for held calls).
-- Reads: _idle_charges, events(kind, name, event_id, parent_id, top_op_id).
-- Columns:
--   run_id   VARCHAR  run id
--   rank     BIGINT   rank
--   step     INTEGER  window's step
--   device   INTEGER  GPU index
--   cause    VARCHAR  the cause (see idle_causes)
--   site     VARCHAR  the call or annotation the time is charged to (NULL: none, between calls)
--   op       VARCHAR  innermost op around that call (NULL: none)
--   top_op   VARCHAR  top-level op around it (NULL: none; an annotation, or a runtime call in no op, charged: itself)
--   frame    VARCHAR  innermost frame of the user's Python code around it (NULL: not recorded or none)
--   calls    BIGINT   distinct calls charged
--   idle_ns  BIGINT   idle time charged, ns
WITH charged AS MATERIALIZED (  -- the charges summed per call first: the names are looked up once per call
  SELECT run_id, rank, step, device, cause, frame, site_id, sum(ns) AS ns
  FROM _idle_charges
  GROUP BY ALL
),
sites AS (  -- those calls (a semi-join: the events are probed, the calls hashed)
  SELECT s.run_id, s.rank, s.event_id, s.kind, s.name, s.parent_id, s.top_op_id
  FROM events s
  SEMI JOIN charged c ON c.run_id = s.run_id AND c.rank = s.rank AND c.site_id = s.event_id
),
around AS (  -- the ops named beside them: a runtime call's op, each call's top-level op
  SELECT run_id, rank, parent_id AS event_id FROM sites WHERE kind = 'runtime'
  UNION
  SELECT run_id, rank, top_op_id AS event_id FROM sites
),
names AS MATERIALIZED (
  SELECT e.run_id, e.rank, e.event_id, e.name
  FROM events e
  SEMI JOIN around a ON a.run_id = e.run_id AND a.rank = e.rank AND a.event_id = e.event_id
)
SELECT c.run_id, c.rank, c.step, c.device, c.cause, s.name AS site,
       CASE WHEN s.kind = 'runtime' THEN p.name ELSE s.name END AS op,
       CASE WHEN s.kind = 'annotation' OR (s.kind = 'runtime' AND s.top_op_id IS NULL) THEN s.name ELSE t.name END
         AS top_op, c.frame,
       count(DISTINCT c.site_id) AS calls, sum(c.ns)::BIGINT AS idle_ns
FROM charged c
LEFT JOIN sites s ON s.run_id = c.run_id AND s.rank = c.rank AND s.event_id = c.site_id
LEFT JOIN names p ON p.run_id = s.run_id AND p.rank = s.rank AND p.event_id = s.parent_id
LEFT JOIN names t ON t.run_id = s.run_id AND t.rank = s.rank AND t.event_id = s.top_op_id
GROUP BY ALL
ORDER BY c.run_id, c.rank, c.step, c.device, idle_ns DESC
