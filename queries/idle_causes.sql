-- idle_causes: every idle nanosecond of each device in each window, split by its cause.
-- Requires: _idle_pieces
-- Definition: the pieces of _idle_pieces (each gap of gpu_gaps cut by what the host thread that explains
-- it was doing) summed per window, device and cause: launch_overhead (the host inside ops and runtime
-- calls launching work), host_sync (a host-device synchronisation drained the queue), input_pipeline
-- (data-loading ranges, pageable host-to-device copies), algorithm_search (cuDNN/cuBLAS autotuning calls),
-- allocator (device memory allocation and release), cast_overhead (inside dtype-cast ops),
-- python_overhead (host time between framework ops), host_unattributed (host time in no op or runtime call
-- outside its step's ops: at the step boundary, or on a thread without ops) and unexplained (the
-- GPU waited with work queued, or the launch was not captured). The causes of a window add up to its
-- idle time (gpu_busy.idle_ns).
-- Reads: _idle_pieces.
-- Columns:
--   run_id   VARCHAR  run id
--   rank     BIGINT   rank
--   step     INTEGER  window's step
--   device   INTEGER  GPU index
--   cause    VARCHAR  launch_overhead, host_sync, input_pipeline, algorithm_search, allocator, cast_overhead, python_overhead, host_unattributed or unexplained
--   idle_ns  BIGINT   idle time with this cause, ns
--   gaps     BIGINT   gaps with time of this cause
SELECT run_id, rank, step, device, cause, sum(ns)::BIGINT AS idle_ns, count(DISTINCT gap_id) AS gaps
FROM _idle_pieces
GROUP BY ALL
ORDER BY run_id, rank, step, device, idle_ns DESC
