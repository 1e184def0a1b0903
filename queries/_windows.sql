-- _windows: the analysis windows of each run and rank.
-- Definition: one window per profiler step, ending when the step is complete on both sides: when its
-- host window has ended and the GPU work it launched has finished (a GPU-bound run's GPU lags its host
-- steps; a launch-bound run's host lags its GPU). Each window starts where the previous one ended, so
-- the windows tile the run and their mean length is the step time a run without a profiler would have
-- in steady state. The first window starts at its host step's start, or where the GPU finished work
-- queued before the profile began (GPU work with no captured launch, running when the step began).
-- Without launch links the windows are the host steps. A run with no steps gets one window, the span
-- from its first GPU work start to its last GPU work end (kernel, memcpy, memset).
-- Reads: steps(run_id, rank, step, ts_ns, dur_ns), events(run_id, rank, kind, step, launch_id, ts_ns, dur_ns).
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank
--   step       INTEGER  step number (NULL for the GPU-span window)
--   win_start  BIGINT   window start, ns
--   win_end    BIGINT   window end, ns
--   host_start BIGINT   the step's host window start, ns (NULL for the GPU-span window)
--   host_end   BIGINT   the step's host window end, ns
WITH work AS (
  SELECT run_id, rank, step, launch_id IS NOT NULL AS launched, ts_ns, ts_ns + dur_ns AS end_ns
  FROM events
  WHERE is_gpu_work(kind)
),
launched_ends AS (  -- when the GPU work each step launched was finished
  SELECT run_id, rank, step, max(end_ns) AS device_end, min(ts_ns) AS device_start
  FROM work WHERE launched AND step IS NOT NULL
  GROUP BY ALL
),
host AS (
  SELECT s.run_id, s.rank, s.step, s.ts_ns AS host_start, s.ts_ns + s.dur_ns AS host_end, l.device_end,
         l.device_start,
         row_number() OVER (PARTITION BY s.run_id, s.rank ORDER BY s.ts_ns) AS k
  FROM steps s
  LEFT JOIN launched_ends l USING (run_id, rank, step)
),
done AS (  -- completion of each step: the latest of its host end, its GPU work's end and the steps before
  SELECT *, max(greatest(host_end, coalesce(device_end, host_end))) OVER (
              PARTITION BY run_id, rank ORDER BY k ROWS UNBOUNDED PRECEDING) AS complete
  FROM host
),
backlog AS (  -- GPU work queued before the profile (no captured launch) still running as the first step began
  SELECT d.run_id, d.rank, max(least(w.end_ns, coalesce(d.device_start, w.end_ns))) AS backlog_end
  FROM done d
  JOIN work w ON w.run_id = d.run_id AND w.rank = d.rank AND NOT w.launched
   AND w.end_ns > d.host_start AND w.ts_ns < coalesce(d.device_start, d.host_end)
  WHERE d.k = 1
    AND EXISTS (SELECT 1 FROM work x WHERE x.run_id = d.run_id AND x.rank = d.rank AND x.launched)
  GROUP BY ALL
)
SELECT d.run_id, d.rank, d.step,
       CASE WHEN d.k = 1 THEN greatest(d.host_start, least(coalesce(b.backlog_end, d.host_start), d.complete))
            ELSE lag(d.complete) OVER (PARTITION BY d.run_id, d.rank ORDER BY d.k) END AS win_start,
       d.complete AS win_end, d.host_start, d.host_end
FROM done d
LEFT JOIN backlog b USING (run_id, rank)
UNION ALL
SELECT e.run_id, e.rank, NULL::INTEGER AS step, min(e.ts_ns) AS win_start, max(e.ts_ns + e.dur_ns) AS win_end,
       NULL::BIGINT AS host_start, NULL::BIGINT AS host_end
FROM events e
WHERE is_gpu_work(e.kind)
  AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = e.run_id AND s.rank = e.rank)
GROUP BY e.run_id, e.rank
