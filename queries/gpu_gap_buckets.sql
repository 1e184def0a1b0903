-- gpu_gap_buckets: GPU idle gaps counted and summed per window, device, kind and length bucket.
-- Requires: gpu_gaps
-- Definition: the rows of gpu_gaps grouped by run, rank, step, device, kind and bucket: how many gaps
-- (gaps) and their total length (gap_ns). What the report's gap histogram and a comparison's gap
-- split read, without a row per gap (millions on big runs).
-- Reads: gpu_gaps.
-- Columns:
--   run_id  VARCHAR  run id
--   rank    BIGINT   rank
--   step    INTEGER  window's step
--   device  INTEGER  GPU index
--   kind    VARCHAR  host_launch, dependency, window_end or unknown
--   bucket  VARCHAR  gap length class: <10us, 10-100us, 100us-1ms, 1-10ms, >=10ms
--   gaps    BIGINT   number of gaps
--   gap_ns  BIGINT   their summed length, ns
SELECT run_id, rank, step, device, kind, bucket, count(*) AS gaps, sum(gap_ns)::BIGINT AS gap_ns
FROM gpu_gaps
GROUP BY ALL
ORDER BY ALL;
