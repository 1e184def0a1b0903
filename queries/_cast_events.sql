-- _cast_events: the cast-family ops of each run (_cast_ops), each with whether it converts dtype itself.
-- Requires: _cast_ops
-- Definition: every op and op stage whose name matches `_cast_ops.family`; `conversion` where it matches
-- `_cast_ops.conversion` too (the others wrap a conversion).
-- Reads: events(run_id, rank, event_id, kind, pid, tid, name, ts_ns, dur_ns, step, input_dtypes, input_shapes), _cast_ops.
-- Columns:
--   run_id        VARCHAR    run id
--   rank          BIGINT     rank
--   event_id      BIGINT     the op
--   pid           BIGINT     its process
--   tid           BIGINT     its thread
--   name          VARCHAR    its name
--   ts_ns         BIGINT     start, ns
--   dur_ns        BIGINT     duration, ns
--   conversion    BOOLEAN    whether it converts dtype itself (else it wraps a conversion)
--   step          INTEGER    the step it is in
--   input_dtypes  VARCHAR[]  its inputs' dtypes as recorded
--   input_shapes  VARCHAR    its inputs' shapes as recorded
WITH names AS (  -- the distinct op names (far fewer than the ops) matched once
  SELECT n.name, regexp_matches(n.name, c.conversion) AS conversion
  FROM (SELECT DISTINCT name FROM events WHERE kind IN ('op', 'op_inner')) n
  CROSS JOIN _cast_ops c
  WHERE regexp_matches(n.name, c.family)
)
SELECT e.run_id, e.rank, e.event_id, e.pid, e.tid, e.name, e.ts_ns, e.dur_ns, n.conversion, e.step, e.input_dtypes,
       e.input_shapes
FROM events e JOIN names n USING (name)
WHERE e.kind IN ('op', 'op_inner')
