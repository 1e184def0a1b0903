-- op_summary: per op name, its CPU time, the GPU time of the kernels it launched and their precision.
-- Requires: _windows, _gpu_work, _kernels
-- Definition: ops (kind 'op') starting inside an analysis window, grouped by name. cpu_incl_ns sums their
-- durations; cpu_self_ns subtracts the time of their child ops and stages. gpu_ns sums the GPU work
-- (kernels, memcpy, memset) each op launched itself (it is the innermost op of the launch call);
-- gpu_top_ns sums, for top-level ops, all GPU work launched anywhere beneath them. gpu_incl_ns sums, for
-- every op, the GPU work launched by it or by any op or stage beneath it (the work's launching op and each
-- op enclosing it, by parent_id): the GPU time the op caused; a call nested in a call of the same name
-- counts in both. kernels_per_call and the coverage columns are over the same work: the kernels launched
-- by the op or beneath it (coverage: the compute kernels among them, gemm, conv, attention), so an
-- `aten::linear` has the coverage of the GEMM its `aten::addmm` launched.
-- Reads: events, _windows, _gpu_work, _kernels.
-- Columns:
--   run_id                VARCHAR  run id
--   rank                  BIGINT   rank
--   name                  VARCHAR  op name
--   calls                 BIGINT   calls in the windows
--   cpu_incl_ns           BIGINT   CPU time including children, ns
--   cpu_self_ns           BIGINT   CPU time without child ops and stages, ns
--   gpu_ns                BIGINT   GPU time of the work the op launched itself, ns
--   gpu_top_ns            BIGINT   GPU time of all work launched beneath it (top-level ops), ns
--   gpu_incl_ns           BIGINT   GPU time of the work launched by it or beneath it (inclusive), ns
--   kernels               BIGINT   kernels the op launched itself
--   kernels_per_call      DOUBLE   kernels launched by it or beneath it, per call
--   cpu_gpu_ratio         DOUBLE   cpu_incl_ns / gpu_ns (large: the CPU cost dominates)
--   fp16_coverage         DOUBLE   share of the compute-kernel time launched by it or beneath it in fp16/bf16/fp8
--   tensor_core_coverage  DOUBLE   share of that compute-kernel time on tensor cores
WITH RECURSIVE ops AS (
  SELECT o.run_id, o.rank, o.event_id, o.name, o.dur_ns
  FROM events o
  JOIN _windows w  -- an op's step is the window its start falls in: match on it, then check the range
    ON o.run_id = w.run_id AND o.rank = w.rank AND o.step IS NOT DISTINCT FROM w.step
   AND (w.step IS NOT NULL OR (o.ts_ns >= w.win_start AND o.ts_ns < w.win_end))
  WHERE o.kind = 'op'
),
children AS (
  SELECT c.run_id, c.rank, c.parent_id AS event_id, sum(c.dur_ns) AS child_ns
  FROM events c WHERE c.kind IN ('op', 'op_inner') AND c.parent_id IS NOT NULL
  GROUP BY ALL
),
gpu AS (
  SELECT g.run_id, g.rank, g.op_id AS event_id, sum(g.end_ns - g.start_ns) AS gpu_ns,
         count(*) FILTER (WHERE g.kind = 'kernel') AS kernels
  FROM _gpu_work g
  GROUP BY ALL
),
cover AS (
  SELECT run_id, rank, op_id AS event_id,
         sum(dur_ns) FILTER (WHERE compute) AS compute_ns,
         sum(dur_ns) FILTER (WHERE compute AND precision IN ('fp16', 'bf16', 'fp8')) AS reduced_ns,
         sum(dur_ns) FILTER (WHERE compute AND tensor_core) AS tc_ns
  FROM _kernels GROUP BY ALL
),
own AS (  -- the work each op launched itself, and its compute kernels
  SELECT run_id, rank, event_id, g.gpu_ns, g.kernels, v.compute_ns, v.reduced_ns, v.tc_ns
  FROM gpu g FULL JOIN cover v USING (run_id, rank, event_id)
),
tree AS MATERIALIZED (  -- each op and stage with the op or stage around it (read once, not at each level)
  SELECT run_id, rank, event_id, parent_id FROM events WHERE kind IN ('op', 'op_inner') AND parent_id IS NOT NULL
),
-- the work launched beneath each op, one row per level up
charged(run_id, rank, event_id, gpu_ns, kernels, compute_ns, reduced_ns, tc_ns) AS (
  SELECT run_id, rank, event_id, gpu_ns, kernels, compute_ns, reduced_ns, tc_ns FROM own
  UNION ALL
  SELECT c.run_id, c.rank, t.parent_id, c.gpu_ns, c.kernels, c.compute_ns, c.reduced_ns, c.tc_ns
  FROM charged c JOIN tree t ON t.run_id = c.run_id AND t.rank = c.rank AND t.event_id = c.event_id
  WHERE t.parent_id IS NOT NULL
),
gpu_incl AS (
  SELECT run_id, rank, event_id, sum(gpu_ns) AS gpu_incl_ns, sum(kernels) AS kernels_incl,
         sum(compute_ns) AS compute_ns, sum(reduced_ns) AS reduced_ns, sum(tc_ns) AS tc_ns
  FROM charged GROUP BY ALL
),
gpu_top AS (
  SELECT g.run_id, g.rank, g.top_op_id AS event_id, sum(g.end_ns - g.start_ns) AS gpu_top_ns
  FROM _gpu_work g
  GROUP BY ALL
)
SELECT o.run_id, o.rank, o.name,
       count(*) AS calls,
       sum(o.dur_ns)::BIGINT AS cpu_incl_ns,
       sum(o.dur_ns - coalesce(c.child_ns, 0))::BIGINT AS cpu_self_ns,
       coalesce(sum(g.gpu_ns), 0)::BIGINT AS gpu_ns,
       coalesce(sum(t.gpu_top_ns), 0)::BIGINT AS gpu_top_ns,
       coalesce(sum(i.gpu_incl_ns), 0)::BIGINT AS gpu_incl_ns,
       coalesce(sum(g.kernels), 0)::BIGINT AS kernels,
       coalesce(sum(i.kernels_incl), 0) / count(*) AS kernels_per_call,
       sum(o.dur_ns) / nullif(sum(g.gpu_ns), 0) AS cpu_gpu_ratio,
       coalesce(sum(i.reduced_ns), 0) / nullif(sum(i.compute_ns), 0) AS fp16_coverage,
       coalesce(sum(i.tc_ns), 0) / nullif(sum(i.compute_ns), 0) AS tensor_core_coverage
FROM ops o
LEFT JOIN children c USING (run_id, rank, event_id)
LEFT JOIN gpu g USING (run_id, rank, event_id)
LEFT JOIN gpu_top t USING (run_id, rank, event_id)
LEFT JOIN gpu_incl i USING (run_id, rank, event_id)
GROUP BY o.run_id, o.rank, o.name
ORDER BY o.run_id, o.rank, cpu_incl_ns DESC
