-- replay_steps: the steps a replay of the timeline measures, as their host ranges.
-- Definition: every row of the steps table with its host event (event_id) and its host window; a step
-- whose event is no host range (the one window of a capture without profiler steps) keeps its window.
-- Reads: steps(run_id, rank, step, event_id, ts_ns, dur_ns).
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   step      INTEGER  step number
--   event_id  BIGINT   the step's event
--   ts_ns     BIGINT   host window start, ns
--   end_ns    BIGINT   host window end, ns
SELECT run_id, rank, step, event_id, ts_ns, ts_ns + dur_ns AS end_ns
FROM steps
ORDER BY run_id, rank, ts_ns
