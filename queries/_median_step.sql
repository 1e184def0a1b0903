-- _median_step: each run's representative step: the analysis window of median length on its first rank.
-- Requires: _windows
-- Definition: the windows of each run's lowest rank ordered by length, then by start; the one at
-- position (n - 1) / 2 of n (counting from 0): the median window, with an even count the shorter of the
-- two middle ones, on a tie the earlier.
-- Reads: _windows.
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank (the run's lowest)
--   step       INTEGER  the window's step (NULL: the GPU-span window of a run without steps)
--   win_start  BIGINT   window start, ns
--   win_end    BIGINT   window end, ns
--   windows    BIGINT   windows of that rank (the median is taken over them)
WITH first_rank AS (
  SELECT w.* FROM _windows w
  WHERE w.rank = (SELECT min(x.rank) FROM _windows x WHERE x.run_id = w.run_id)
),
ordered AS (
  SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY win_end - win_start, win_start) - 1 AS k,
         count(*) OVER (PARTITION BY run_id) AS windows
  FROM first_rank
)
SELECT run_id, rank, step, win_start, win_end, windows
FROM ordered
WHERE k = (windows - 1) // 2
