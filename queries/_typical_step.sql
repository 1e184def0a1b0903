-- _typical_step: each run's representative step: the analysis window on its first rank nearest the mean.
-- Requires: _windows
-- Definition: the windows of each run's lowest rank; the one whose length is nearest their mean length
-- (the step time a report states), on a tie the earlier. Its own length is within the spread of the
-- steps around that mean.
-- Reads: _windows.
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank (the run's lowest)
--   step       INTEGER  the window's step (NULL: the GPU-span window of a run without steps)
--   win_start  BIGINT   window start, ns
--   win_end    BIGINT   window end, ns
--   windows    BIGINT   windows of that rank (the mean is taken over them)
WITH first_rank AS (
  SELECT w.* FROM _windows w
  WHERE w.rank = (SELECT min(x.rank) FROM _windows x WHERE x.run_id = w.run_id)
),
measured AS (
  SELECT *, win_end - win_start AS len, avg(win_end - win_start) OVER (PARTITION BY run_id) AS mean_len,
         count(*) OVER (PARTITION BY run_id) AS windows
  FROM first_rank
),
ordered AS (
  SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY abs(len - mean_len), win_start) AS k
  FROM measured
)
SELECT run_id, rank, step, win_start, win_end, windows
FROM ordered
WHERE k = 1
