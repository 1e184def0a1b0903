-- _windows: the analysis windows of each run and rank.
-- Definition: every profiler step window from `steps`; a run with no steps gets one window, the span
-- from its first GPU work start to its last GPU work end (kernel, memcpy, memset).
-- Reads: steps(run_id, rank, step, ts_ns, dur_ns), events(run_id, rank, kind, ts_ns, dur_ns).
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank
--   step       INTEGER  step number (NULL for the GPU-span window)
--   win_start  BIGINT   window start, ns
--   win_end    BIGINT   window end, ns
SELECT run_id, rank, step, ts_ns AS win_start, ts_ns + dur_ns AS win_end
FROM steps
UNION ALL
SELECT e.run_id, e.rank, NULL::INTEGER AS step, min(e.ts_ns) AS win_start, max(e.ts_ns + e.dur_ns) AS win_end
FROM events e
WHERE e.kind IN ('kernel', 'memcpy', 'memset')
  AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.run_id = e.run_id AND s.rank = e.rank)
GROUP BY e.run_id, e.rank
