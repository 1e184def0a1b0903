-- summary_coverage: how much of the compute-kernel time in Paddle summary text ran in reduced precision and on tensor cores.
-- Requires: _compute_classes
-- Definition: the kernel rows of the Operator Summary (each under the op that launched it), classified by
-- `kernel_classes` (the one kernel-name rule table); compute kernels are those of _compute_classes.
-- fp16_coverage = share of their GPU time in fp16, bf16 or fp8; tensor_core_coverage = share in
-- tensor-core kernels (as precision_coverage, but over the whole profile: summary text has no steps).
-- Reads: op_stats(run_id, rank, name, row_type, gpu_total_ns), kernel_classes, _compute_classes.
-- Columns:
--   run_id                VARCHAR  run id
--   compute_ns            DOUBLE   GPU time of compute kernels, ns
--   reduced_ns            DOUBLE   compute time in fp16, bf16 or fp8, ns
--   tensor_core_ns        DOUBLE   compute time in tensor-core kernels, ns
--   fp16_coverage         DOUBLE   reduced_ns / compute_ns
--   tensor_core_coverage  DOUBLE   tensor_core_ns / compute_ns
WITH kernels AS (
  SELECT o.run_id, o.gpu_total_ns, c.precision, c.tensor_core,
         c.kernel_class IN (SELECT kernel_class FROM _compute_classes) AS compute
  FROM op_stats o
  JOIN kernel_classes c USING (run_id, rank, name)
  WHERE o.row_type = 'kernel'
)
SELECT run_id,
       sum(gpu_total_ns) FILTER (WHERE compute) AS compute_ns,
       sum(gpu_total_ns) FILTER (WHERE compute AND precision IN ('fp16', 'bf16', 'fp8')) AS reduced_ns,
       sum(gpu_total_ns) FILTER (WHERE compute AND tensor_core) AS tensor_core_ns,
       coalesce(sum(gpu_total_ns) FILTER (WHERE compute AND precision IN ('fp16', 'bf16', 'fp8')), 0)
         / nullif(sum(gpu_total_ns) FILTER (WHERE compute), 0) AS fp16_coverage,
       coalesce(sum(gpu_total_ns) FILTER (WHERE compute AND tensor_core), 0)
         / nullif(sum(gpu_total_ns) FILTER (WHERE compute), 0) AS tensor_core_coverage
FROM kernels
GROUP BY run_id
ORDER BY run_id
