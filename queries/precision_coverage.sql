-- precision_coverage: how much of the compute-kernel time ran in reduced precision and on tensor cores.
-- Requires: _gpu_work, _kernels
-- Definition: compute kernels are gemm, conv and attention kernels (see _kernels). fp16_coverage = share
-- of their time in fp16, bf16 or fp8; tensor_core_coverage = share of their time in tensor-core kernels.
-- Times are summed over all windows of the run.
-- Reads: _kernels.
-- Columns:
--   run_id                VARCHAR  run id
--   rank                  BIGINT   rank
--   kernel_ns             BIGINT   all kernel time, ns
--   compute_ns            BIGINT   gemm + conv + attention kernel time, ns
--   reduced_ns            BIGINT   compute time in fp16, bf16 or fp8, ns
--   tensor_core_ns        BIGINT   compute time in tensor-core kernels, ns
--   fp16_coverage         DOUBLE   reduced_ns / compute_ns
--   tensor_core_coverage  DOUBLE   tensor_core_ns / compute_ns
SELECT run_id, rank,
       sum(dur_ns)::BIGINT AS kernel_ns,
       coalesce(sum(dur_ns) FILTER (WHERE compute), 0)::BIGINT AS compute_ns,
       coalesce(sum(dur_ns) FILTER (WHERE compute AND precision IN ('fp16', 'bf16', 'fp8')), 0)::BIGINT AS reduced_ns,
       coalesce(sum(dur_ns) FILTER (WHERE compute AND tensor_core), 0)::BIGINT AS tensor_core_ns,
       coalesce(sum(dur_ns) FILTER (WHERE compute AND precision IN ('fp16', 'bf16', 'fp8')), 0)
         / sum(dur_ns) FILTER (WHERE compute) AS fp16_coverage,
       coalesce(sum(dur_ns) FILTER (WHERE compute AND tensor_core), 0)
         / sum(dur_ns) FILTER (WHERE compute) AS tensor_core_coverage
FROM _kernels
GROUP BY run_id, rank
ORDER BY run_id, rank
