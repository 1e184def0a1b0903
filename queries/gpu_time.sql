-- gpu_time: GPU time per window by kind of work and kernel class.
-- Requires: _windows, _gpu_work
-- Definition: the GPU work of each window (clipped to it, see _gpu_work) summed per device, kind
-- (kernel, memcpy, memset) and, for kernels, kernel class (from `kernel_classes`, the one kernel-name
-- rule table, as _gpu_work carries it); copies and sets have no class. Durations are summed, not
-- merged: work overlapping on several streams counts once per stream (gpu_busy has the merged time).
-- Reads: _gpu_work.
-- Columns:
--   run_id        VARCHAR  run id
--   rank          BIGINT   rank
--   step          INTEGER  window's step
--   device        INTEGER  GPU index
--   kind          VARCHAR  kernel, memcpy or memset
--   kernel_class  VARCHAR  gemm, conv, attention, elementwise, comm, cast, ... (NULL for copies and sets)
--   events        BIGINT   GPU events
--   time_ns       BIGINT   summed duration inside the window, ns
SELECT g.run_id, g.rank, g.step, g.device, g.kind, g.kernel_class,
       count(*) AS events, sum(g.end_ns - g.start_ns)::BIGINT AS time_ns
FROM _gpu_work g
GROUP BY ALL
ORDER BY g.run_id, g.rank, g.step, g.device, g.kind, g.kernel_class
