-- _run_starts: where each run's and rank's events and its analysis windows begin.
-- Requires: _windows
-- Definition: the start of the rank's first event, and of its first analysis window (_windows); a rank
-- without windows starts them at its first event.
-- Reads: events(run_id, rank, ts_ns), _windows.
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank
--   min_ts     BIGINT   start of its first event, ns
--   first_win  BIGINT   start of its first window, ns
SELECT e.run_id, e.rank, e.min_ts, coalesce(w.first_win, e.min_ts) AS first_win
FROM (SELECT run_id, rank, min(ts_ns) AS min_ts FROM events GROUP BY ALL) e
LEFT JOIN (SELECT run_id, rank, min(win_start) AS first_win FROM _windows GROUP BY ALL) w USING (run_id, rank)
