-- gpu_busy: GPU busy and idle time per window and device.
-- Requires: _windows, _gpu_reach
-- Definition: busy_ns is the length of the union of all GPU work intervals of the device in the window
-- (kernels, memcpy, memset, across all streams: overlapping work is merged, never summed, so busy time
-- cannot exceed the window); kernel_busy_ns is the same union over kernels only (copies can hide an
-- idle compute engine). idle_ns = window_ns - busy_ns; idle_ratio = idle_ns / window_ns.
-- exposed_comm_ns is the part of busy_ns covered by communication kernels alone (no other GPU work at the
-- same time): collectives not hidden behind compute, including the time a fast rank waits in a
-- collective for a slower one. Each union's length is the sum of what every interval adds past the
-- reach of the earlier work of its set (see _gpu_reach).
-- Reads: _windows, _gpu_reach.
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  step (NULL: the whole GPU-active span of a run without steps)
--   device          INTEGER  GPU index
--   window_ns       BIGINT   window length, ns
--   busy_ns         BIGINT   union of GPU work, ns
--   kernel_busy_ns  BIGINT   union of kernels, ns
--   idle_ns         BIGINT   window_ns - busy_ns
--   idle_ratio      DOUBLE   idle_ns / window_ns
--   exposed_comm_ns BIGINT   busy_ns minus the union of all non-communication GPU work, ns
WITH busy AS (
  SELECT run_id, rank, step, device,
         sum(greatest(end_ns - greatest(start_ns, coalesce(reach, start_ns)), 0))::BIGINT AS busy_ns,
         coalesce(sum(greatest(end_ns - greatest(start_ns, coalesce(kernel_reach, start_ns)), 0))
                    FILTER (WHERE kind = 'kernel'), 0)::BIGINT AS kernel_busy_ns,
         coalesce(sum(greatest(end_ns - greatest(start_ns, coalesce(not_comm_reach, start_ns)), 0))
                    FILTER (WHERE NOT comm), 0)::BIGINT AS not_comm_ns
  FROM _gpu_reach
  GROUP BY run_id, rank, step, device
)
SELECT b.run_id, b.rank, b.step, b.device,
       (w.win_end - w.win_start)::BIGINT AS window_ns,
       b.busy_ns, b.kernel_busy_ns,
       (w.win_end - w.win_start - b.busy_ns)::BIGINT AS idle_ns,
       (w.win_end - w.win_start - b.busy_ns) / (w.win_end - w.win_start) AS idle_ratio,
       (b.busy_ns - b.not_comm_ns)::BIGINT AS exposed_comm_ns
FROM busy b
JOIN _windows w ON b.run_id = w.run_id AND b.rank = w.rank AND b.step IS NOT DISTINCT FROM w.step
ORDER BY b.run_id, b.rank, b.step, b.device
