-- gpu_gaps: every maximal idle interval of each device in each window, classified.
-- Requires: _windows, _gpu_islands
-- Definition: the idle intervals between consecutive busy islands (union of kernels, memcpy, memset on
-- the device), plus the idle time from the window start to the first island and from the last island to
-- the window end. A gap is 'host_launch' when the call that launched the next GPU event started after
-- the gap began: the GPU had nothing queued and waited for the CPU to issue work. Otherwise it is
-- 'dependency' (the work was queued but waited for something else: a sync, an event, another stream);
-- the gap after the last island is 'window_end' and a next event without a captured launch is 'unknown'.
-- Reads: _windows, _gpu_islands, events(event_id, kind, ts_ns, pid, tid, name).
-- Columns:
--   run_id         VARCHAR  run id
--   rank           BIGINT   rank
--   step           INTEGER  window's step
--   device         INTEGER  GPU index
--   gap_start_ns   BIGINT   start of the idle interval, ns
--   gap_end_ns     BIGINT   end of the idle interval, ns
--   gap_ns         BIGINT   length, ns
--   kind           VARCHAR  host_launch, dependency, window_end or unknown
--   prev_event_id  BIGINT   GPU event that ended the previous island (first event of it; NULL at window start)
--   next_event_id  BIGINT   first GPU event after the gap (NULL at window end)
--   launch_ts_ns   BIGINT   start of the next event's launch call, ns
--   launch_pid     BIGINT   process of the launching thread
--   launch_tid     BIGINT   launching thread
--   bucket         VARCHAR  gap length class: <10us, 10-100us, 100us-1ms, 1-10ms, >=10ms
WITH inner_gaps AS (
  SELECT i.run_id, i.rank, i.step, i.device,
         coalesce(i.prev_end_ns, w.win_start) AS gap_start_ns, i.start_ns AS gap_end_ns,
         i.prev_event_id, i.first_event_id AS next_event_id, i.first_launch_id AS launch_id
  FROM _gpu_islands i
  JOIN _windows w ON i.run_id = w.run_id AND i.rank = w.rank AND i.step IS NOT DISTINCT FROM w.step
),
tail_gaps AS (
  SELECT i.run_id, i.rank, i.step, i.device, max(i.end_ns) AS gap_start_ns, any_value(w.win_end) AS gap_end_ns,
         arg_max(i.first_event_id, i.island) AS prev_event_id, NULL::BIGINT AS next_event_id,
         NULL::BIGINT AS launch_id
  FROM _gpu_islands i
  JOIN _windows w ON i.run_id = w.run_id AND i.rank = w.rank AND i.step IS NOT DISTINCT FROM w.step
  GROUP BY i.run_id, i.rank, i.step, i.device
),
gaps AS (
  SELECT * FROM inner_gaps WHERE gap_end_ns > gap_start_ns
  UNION ALL
  SELECT * FROM tail_gaps WHERE gap_end_ns > gap_start_ns
)
SELECT g.run_id, g.rank, g.step, g.device, g.gap_start_ns, g.gap_end_ns,
       (g.gap_end_ns - g.gap_start_ns)::BIGINT AS gap_ns,
       CASE WHEN g.next_event_id IS NULL THEN 'window_end'
            WHEN l.event_id IS NULL THEN 'unknown'
            WHEN l.ts_ns > g.gap_start_ns THEN 'host_launch'
            ELSE 'dependency' END AS kind,
       g.prev_event_id, g.next_event_id,
       l.ts_ns AS launch_ts_ns, l.pid AS launch_pid, l.tid AS launch_tid,
       CASE WHEN g.gap_end_ns - g.gap_start_ns < 10000 THEN '<10us'
            WHEN g.gap_end_ns - g.gap_start_ns < 100000 THEN '10-100us'
            WHEN g.gap_end_ns - g.gap_start_ns < 1000000 THEN '100us-1ms'
            WHEN g.gap_end_ns - g.gap_start_ns < 10000000 THEN '1-10ms'
            ELSE '>=10ms' END AS bucket
FROM gaps g
LEFT JOIN events l ON l.run_id = g.run_id AND l.rank = g.rank AND l.event_id = g.launch_id AND l.kind = 'runtime'
  -- a launch is a runtime call (the model links no other): those rows alone are read
ORDER BY g.run_id, g.rank, g.step, g.device, g.gap_start_ns
