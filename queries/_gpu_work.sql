-- _gpu_work: GPU work intervals clipped to the analysis windows.
-- Requires: _windows
-- Definition: kernels, memcpy and memset (sync records and GPU-side annotations are not work), each cut
-- to the part inside a window; work spanning two windows counts in both, once per window.
-- Kernels carry their row of `kernel_classes` (the one kernel-name rule table), looked up here once for
-- every query after; the names themselves are not carried (hundreds of bytes each, millions of rows).
-- Reads: events(run_id, rank, event_id, kind, name, op_id, top_op_id, device, ts_ns, dur_ns, launch_id),
-- _windows, kernel_classes.
-- Columns:
--   run_id            VARCHAR  run id
--   rank              BIGINT   rank
--   step              INTEGER  window's step (NULL for the GPU-span window)
--   device            INTEGER  GPU index
--   kind              VARCHAR  kernel, memcpy or memset
--   kernel_class      VARCHAR  gemm, conv, attention, comm, ... (NULL for memcpy and memset)
--   kernel_precision  VARCHAR  precision told by its name (fp32, tf32, fp16, bf16, fp8, ... or unknown)
--   tensor_core       BOOLEAN  runs on tensor cores, as its name tells
--   op_id             BIGINT   innermost op that launched it
--   top_op_id         BIGINT   top-level op that launched it
--   ts_ns             BIGINT   the event's own start (not clipped), ns
--   dur_ns            BIGINT   the event's own duration (not clipped), ns
--   event_id          BIGINT   the GPU event
--   launch_id         BIGINT   the runtime call that launched it
--   start_ns          BIGINT   start inside the window, ns
--   end_ns            BIGINT   end inside the window, ns
SELECT w.run_id, w.rank, w.step, e.device, e.kind, c.kernel_class, c.precision AS kernel_precision,
       c.tensor_core, e.op_id, e.top_op_id, e.ts_ns, e.dur_ns, e.event_id, e.launch_id,
       greatest(e.ts_ns, w.win_start) AS start_ns,
       least(e.ts_ns + e.dur_ns, w.win_end) AS end_ns
FROM events e
JOIN _windows w
  ON e.run_id = w.run_id AND e.rank = w.rank
 AND e.ts_ns < w.win_end AND e.ts_ns + e.dur_ns > w.win_start
LEFT JOIN kernel_classes c  -- (other kinds: a NULL name, no match; a condition on events alone here made DuckDB 1
                            -- compare every pair)
  ON c.run_id = e.run_id AND c.rank = e.rank AND c.name = CASE WHEN e.kind = 'kernel' THEN e.name END
WHERE is_gpu_work(e.kind)
