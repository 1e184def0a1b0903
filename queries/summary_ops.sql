-- summary_ops: per op of Paddle summary text, its calls and its total CPU and GPU time.
-- Requires: _cast_ops
-- Definition: the Operator Summary rows of depth 0 (ops, not their stages or kernels) summed per op name
-- over every table of the text and every rank of the run. Summary text has no timeline: the totals are
-- for the whole profile, not per step.
-- Reads: op_stats(run_id, op, depth, calls, cpu_total_ns, cpu_max_ns, gpu_total_ns), _cast_ops.
-- Columns:
--   run_id       VARCHAR  run id
--   name         VARCHAR  op name (Paddle's decorations such as ` dygraph` removed)
--   calls        BIGINT   calls
--   cpu_incl_ns  DOUBLE   CPU time including its stages, ns
--   gpu_ns       DOUBLE   GPU time of the kernels under it, ns
--   cpu_max_ns   DOUBLE   its longest call's CPU time, ns
--   is_cast      BOOLEAN  whether the op is a dtype conversion (see _cast_ops)
SELECT o.run_id, o.op AS name, sum(o.calls)::BIGINT AS calls, sum(o.cpu_total_ns) AS cpu_incl_ns,
       sum(o.gpu_total_ns) AS gpu_ns, max(o.cpu_max_ns) AS cpu_max_ns,
       bool_or(regexp_matches(o.op, c.conversion)) AS is_cast
FROM op_stats o
CROSS JOIN _cast_ops c
WHERE o.depth = 0
GROUP BY o.run_id, o.op
ORDER BY run_id, cpu_incl_ns DESC
