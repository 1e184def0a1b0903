-- stream_idle: idle time between consecutive GPU events of each stream, classified as HTA does.
-- Requires: _gpu_work
-- Definition: per window, device and stream, GPU work (kernels, memcpy, memset) in start order; a gap is
-- the time from one event's end to the next event's start when positive. host_wait: the next event's
-- launch call started after the previous event ended (the CPU had not issued it yet); kernel_wait: any
-- other gap shorter than 30 us; other: the rest, including gaps before events with no captured launch.
-- These are Holistic Trace Analysis's idle-time classes, per stream; traceq's own gpu_gaps are per
-- device over the union of streams, which is what decides whether the GPU as a whole waited.
-- Reads: _gpu_work, events(stream, ts_ns).
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  window's step
--   device          INTEGER  GPU index
--   stream          BIGINT   stream
--   gpu_events      BIGINT   GPU events on the stream in the window
--   gaps            BIGINT   positive gaps between consecutive events
--   host_wait_ns    BIGINT   gap time classified host_wait, ns
--   kernel_wait_ns  BIGINT   gap time classified kernel_wait, ns
--   other_ns        BIGINT   gap time classified other, ns
WITH work AS (
  SELECT g.*, e.stream, l.ts_ns AS launch_ts
  FROM _gpu_work g
  JOIN events e ON e.run_id = g.run_id AND e.rank = g.rank AND e.event_id = g.event_id
  LEFT JOIN events l ON l.run_id = g.run_id AND l.rank = g.rank AND l.event_id = g.launch_id
),
seq AS (
  SELECT *, lag(end_ns) OVER (PARTITION BY run_id, rank, step, device, stream ORDER BY start_ns, event_id) AS prev_end
  FROM work
),
gaps AS (
  SELECT *, start_ns - prev_end AS gap_ns,
         CASE WHEN launch_ts IS NULL THEN 'other'
              WHEN launch_ts >= prev_end THEN 'host_wait'
              WHEN start_ns - prev_end < 30000 THEN 'kernel_wait'
              ELSE 'other' END AS class
  FROM seq
)
SELECT run_id, rank, step, device, stream,
       count(*) AS gpu_events,
       count(*) FILTER (WHERE gap_ns > 0) AS gaps,
       coalesce(sum(gap_ns) FILTER (WHERE gap_ns > 0 AND class = 'host_wait'), 0)::BIGINT AS host_wait_ns,
       coalesce(sum(gap_ns) FILTER (WHERE gap_ns > 0 AND class = 'kernel_wait'), 0)::BIGINT AS kernel_wait_ns,
       coalesce(sum(gap_ns) FILTER (WHERE gap_ns > 0 AND class = 'other'), 0)::BIGINT AS other_ns
FROM gaps
GROUP BY run_id, rank, step, device, stream
ORDER BY run_id, rank, step, device, stream
