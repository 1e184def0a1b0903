-- sync_calls: the runtime calls that make the host wait for the GPU, per run and rank.
-- Definition: CUDA runtime and driver calls (kind 'runtime') named like a synchronisation
-- (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize`, ...) or a blocking copy
-- (`cudaMemcpy*` without `Async`), over the whole run, not only its windows.
-- Reads: events(run_id, rank, kind, name).
-- Columns:
--   run_id  VARCHAR  run id
--   rank    BIGINT   rank
--   calls   BIGINT   such calls
SELECT run_id, rank, count(*) AS calls
FROM events
WHERE kind = 'runtime' AND (name LIKE '%Synchronize%' OR (name LIKE 'cudaMemcpy%' AND name NOT LIKE '%Async%'))
GROUP BY run_id, rank
ORDER BY run_id, rank
