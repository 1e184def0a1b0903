-- summary_ops: per op of Paddle summary text, its calls and its total CPU and GPU time.
-- Definition: the Operator Summary rows of depth 0 (ops, not their stages or kernels) summed per op name
-- over every table of the text and every rank of the run. Summary text has no timeline: the totals are
-- for the whole profile, not per step.
-- Reads: op_stats(run_id, op, depth, calls, cpu_total_ns, gpu_total_ns).
-- Columns:
--   run_id       VARCHAR  run id
--   name         VARCHAR  op name (Paddle's decorations such as ` dygraph` removed)
--   calls        BIGINT   calls
--   cpu_incl_ns  DOUBLE   CPU time including its stages, ns
--   gpu_ns       DOUBLE   GPU time of the kernels under it, ns
SELECT run_id, op AS name, sum(calls)::BIGINT AS calls, sum(cpu_total_ns) AS cpu_incl_ns, sum(gpu_total_ns) AS gpu_ns
FROM op_stats
WHERE depth = 0
GROUP BY run_id, op
ORDER BY run_id, cpu_incl_ns DESC
