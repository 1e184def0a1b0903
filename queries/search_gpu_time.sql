-- search_gpu_time: GPU time spent trying candidate algorithms, per window and device.
-- Requires: _gpu_work, _search_calls
-- Definition: the GPU work (kernels, memcpy, memset, clipped to the window as in _gpu_work) launched from
-- inside a call of _search_calls (the launching runtime call starts within the searching call, on its
-- thread): the candidate algorithms cuDNN/cuBLAS timed, and the chosen one; per kind of work and kernel
-- class as in gpu_time (this time is part of gpu_time's). Summed, not merged.
-- Reads: _gpu_work, _search_calls, events(event_id, pid, tid, ts_ns, dur_ns).
-- Columns:
--   run_id        VARCHAR  run id
--   rank          BIGINT   rank
--   step          INTEGER  window's step
--   device        INTEGER  GPU index
--   kind          VARCHAR  kernel, memcpy or memset
--   kernel_class  VARCHAR  the kernels' class (NULL for copies and sets)
--   gpu_events    BIGINT   GPU work launched inside searching calls
--   time_ns       BIGINT   its summed duration inside the window, ns
WITH calls AS (
  SELECT c.run_id, c.rank, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns
  FROM _search_calls c JOIN events e ON e.run_id = c.run_id AND e.rank = c.rank AND e.event_id = c.event_id
)
SELECT g.run_id, g.rank, g.step, g.device, g.kind, g.kernel_class, count(*) AS gpu_events, sum(g.end_ns - g.start_ns)::BIGINT AS time_ns
FROM _gpu_work g
JOIN events l ON l.run_id = g.run_id AND l.rank = g.rank AND l.event_id = g.launch_id
JOIN calls c ON c.run_id = l.run_id AND c.rank = l.rank AND c.pid = l.pid AND c.tid = l.tid
 AND l.ts_ns >= c.ts_ns AND l.ts_ns < c.end_ns
GROUP BY ALL
ORDER BY g.run_id, g.rank, g.step, g.device, g.kind, g.kernel_class
