-- replay_host: the host ranges a replay of the timeline issues, each with its idle cause.
-- Requires: _host_marks
-- Definition: every host range of a thread (kinds op, op_inner, python, annotation, runtime and step, with
-- a process, a thread and a duration of 0 or more), with the idle cause _host_marks gives the event itself
-- (NULL where it marks none), plus the ranges where the host blocked on a full launch queue (kind
-- 'queue_full', as the readers store them), which the replay reads as waits of the launches they overlap,
-- not as ranges.
-- A user's range chosen as a step (`train_step 7`) is replayed as the annotation it was recorded as (a step
-- that is no profiler step by the model's rule, the macro is_profiler_step): like an op its start and end
-- cost the profiler a transition each, but nothing runs in it, so a thread whose step is open still waits
-- (the training loop's thread while the backward runs on another).
-- Reads: events(run_id, rank, event_id, kind, name, pid, tid, ts_ns, dur_ns, step, depth, parent_id, input_shapes), steps(run_id, rank, name, event_id), _host_marks.
-- Columns:
--   run_id     VARCHAR  run id
--   rank       BIGINT   rank
--   event_id   BIGINT   the host event
--   kind       VARCHAR  event kind ('queue_full': the host blocked on a full launch queue)
--   name       VARCHAR  event name
--   pid        BIGINT   host process
--   tid        BIGINT   host thread
--   ts_ns      BIGINT   start, ns
--   end_ns     BIGINT   end, ns
--   step       INTEGER  profiler step of the event
--   depth      INTEGER  enclosing ops
--   parent_id  BIGINT   innermost enclosing op
--   cause      VARCHAR  the event's own idle cause (see _host_marks), NULL where none
--   shaped     BOOLEAN  whether the profiler recorded the event's input shapes (NVTX op ranges with shapes)
WITH user_steps AS (  -- steps that are no profiler steps, by the model's rule
  SELECT DISTINCT run_id, rank, event_id FROM steps WHERE NOT is_profiler_step(name)
)
SELECT e.run_id, e.rank, e.event_id,
       CASE WHEN e.kind = 'step' AND u.event_id IS NOT NULL THEN 'annotation' ELSE e.kind END AS kind,
       e.name, e.pid, e.tid, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
       e.step, e.depth, e.parent_id, m.cause, e.input_shapes IS NOT NULL AS shaped
FROM events e
LEFT JOIN user_steps u ON u.run_id = e.run_id AND u.rank = e.rank AND u.event_id = e.event_id
LEFT JOIN _host_marks m ON m.run_id = e.run_id AND m.rank = e.rank AND m.event_id = e.event_id
WHERE (e.kind IN ('op', 'op_inner', 'python', 'annotation', 'runtime', 'step')
       AND e.pid IS NOT NULL AND e.tid IS NOT NULL AND e.dur_ns >= 0)
   OR e.kind = 'queue_full'
