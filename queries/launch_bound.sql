-- launch_bound: how much of each window the GPU spent waiting for the CPU to launch work.
-- Requires: _windows, _gpu_work, gpu_gaps
-- Definition: launch_bound_ratio = time in host-launch gaps (see gpu_gaps: the next GPU event's launch
-- call started after the device went idle) / window time. Supporting numbers over the window's GPU
-- work: GPU events, median kernel duration, median duration of the calls that launched kernels, the
-- share of kernels that ran shorter than their launch call, and the median queue depth (GPU events
-- launched but not yet started on the device, sampled when each launch call starts).
-- Reads: gpu_gaps, _gpu_work, _windows, events.
-- Columns:
--   run_id                VARCHAR  run id
--   rank                  BIGINT   rank
--   step                  INTEGER  window's step
--   device                INTEGER  GPU index
--   window_ns             BIGINT   window length, ns
--   host_launch_gap_ns    BIGINT   idle time in host-launch gaps, ns
--   launch_bound_ratio    DOUBLE   host_launch_gap_ns / window_ns
--   gpu_events            BIGINT   kernels, memcpy and memset in the window
--   kernels               BIGINT   kernels in the window
--   median_kernel_ns      DOUBLE   median kernel duration, ns
--   median_launch_ns      DOUBLE   median duration of the calls that launched those kernels, ns
--   short_kernel_share    DOUBLE   share of kernels shorter than their launch call
--   median_queue_depth    DOUBLE   median number of launched, not yet started GPU events at a launch
WITH gaps AS (
  SELECT run_id, rank, step, device, sum(gap_ns) FILTER (WHERE kind = 'host_launch') AS host_launch_gap_ns
  FROM gpu_gaps
  GROUP BY ALL
),
work AS (
  SELECT g.*, l.ts_ns AS launch_ts, l.dur_ns AS launch_dur
  FROM _gpu_work g
  LEFT JOIN events l ON l.run_id = g.run_id AND l.rank = g.rank AND l.event_id = g.launch_id AND l.kind = 'runtime'
    -- a launch is a runtime call (the model links no other): those rows alone are read
),
stats AS (
  SELECT run_id, rank, step, device,
         count(*) AS gpu_events,
         count(*) FILTER (WHERE kind = 'kernel') AS kernels,
         median(dur_ns) FILTER (WHERE kind = 'kernel') AS median_kernel_ns,
         median(launch_dur) FILTER (WHERE kind = 'kernel') AS median_launch_ns,
         avg(CASE WHEN dur_ns < launch_dur THEN 1.0 ELSE 0.0 END) FILTER (WHERE kind = 'kernel'
             AND launch_dur IS NOT NULL) AS short_kernel_share
  FROM work
  GROUP BY ALL
),
queue_moves AS (
  SELECT run_id, rank, step, device, launch_ts AS t, 1 AS delta, 1 AS is_launch FROM work
  WHERE launch_ts IS NOT NULL
  UNION ALL
  SELECT run_id, rank, step, device, ts_ns AS t, -1 AS delta, 0 AS is_launch FROM work
  WHERE launch_ts IS NOT NULL
),
queue AS (  -- one running count over every window in turn: a window's moves add up to zero (each launch
            -- has its start), so none carries into the next; one sort, not one per window, is 2x faster
  SELECT *, sum(delta) OVER (ORDER BY run_id, rank, step, device, t, delta ROWS UNBOUNDED PRECEDING) AS depth
  FROM queue_moves
),
queue_stats AS (
  SELECT run_id, rank, step, device, median(depth - 1) AS median_queue_depth
  FROM queue WHERE is_launch = 1 GROUP BY ALL
)
SELECT s.run_id, s.rank, s.step, s.device,
       (w.win_end - w.win_start)::BIGINT AS window_ns,
       coalesce(g.host_launch_gap_ns, 0)::BIGINT AS host_launch_gap_ns,
       coalesce(g.host_launch_gap_ns, 0) / (w.win_end - w.win_start) AS launch_bound_ratio,
       s.gpu_events, s.kernels, s.median_kernel_ns, s.median_launch_ns, s.short_kernel_share,
       q.median_queue_depth
FROM stats s
JOIN _windows w ON s.run_id = w.run_id AND s.rank = w.rank AND s.step IS NOT DISTINCT FROM w.step
LEFT JOIN gaps g ON g.run_id = s.run_id AND g.rank = s.rank AND g.step IS NOT DISTINCT FROM s.step
  AND g.device = s.device
LEFT JOIN queue_stats q ON q.run_id = s.run_id AND q.rank = s.rank AND q.step IS NOT DISTINCT FROM s.step
  AND q.device = s.device
ORDER BY s.run_id, s.rank, s.step, s.device
