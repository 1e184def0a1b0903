-- _top_ops: the 20 top-level ops of each run's summary tables that took the most CPU time.
-- Definition: the op_stats rows of ops at depth 0 over all threads merged (Paddle summary text), the 20
-- with the largest total CPU time per run (ties in no set order), those without one last.
-- Reads: op_stats(run_id, name, depth, row_type, thread, calls, cpu_total_ns, gpu_total_ns).
-- Columns:
--   run_id        VARCHAR  run id
--   name          VARCHAR  op name
--   cpu_total_ns  DOUBLE   its total CPU time, ns
--   gpu_total_ns  DOUBLE   its total GPU time, ns
--   calls         BIGINT   calls
SELECT run_id, name, cpu_total_ns, gpu_total_ns, calls
FROM op_stats
WHERE depth = 0 AND row_type = 'op' AND thread = 'All threads merged'
QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY cpu_total_ns DESC NULLS LAST) <= 20
