-- _event_categories: the event categories each run's trace uses.
-- Definition: every distinct category of the run's events (the profiler's names, such as `cpu_op`,
-- `kernel`, `cuda_runtime`; NULL where an event has none).
-- Reads: events(run_id, category).
-- Columns:
--   run_id    VARCHAR  run id
--   category  VARCHAR  a category of its events
SELECT DISTINCT run_id, category FROM events
