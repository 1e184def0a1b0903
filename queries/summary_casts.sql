-- summary_casts: the dtype conversions in Paddle summary text, their calls and total CPU and GPU time.
-- Requires: _cast_ops
-- Definition: the Operator Summary rows of depth 0 whose op is a conversion (see _cast_ops), summed over
-- every table of the text and every rank of the run (the whole profile: summary text has no steps).
-- Reads: op_stats(run_id, op, depth, calls, cpu_total_ns, gpu_total_ns), _cast_ops.
-- Columns:
--   run_id       VARCHAR  run id
--   calls        BIGINT   conversion calls
--   cpu_incl_ns  DOUBLE   their CPU time, ns
--   gpu_ns       DOUBLE   their GPU time, ns
SELECT o.run_id, sum(o.calls)::BIGINT AS calls, sum(o.cpu_total_ns) AS cpu_incl_ns, sum(o.gpu_total_ns) AS gpu_ns
FROM op_stats o
CROSS JOIN _cast_ops c
WHERE o.depth = 0 AND regexp_matches(o.op, c.conversion)
GROUP BY o.run_id
ORDER BY o.run_id
