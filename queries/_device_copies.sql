-- _device_copies: cast-family ops that moved a tensor between host and device rather than converting it.
-- Requires: _cast_ops
-- Definition: an op of the cast family (see _cast_ops: `aten::to`, `aten::_to_copy`, ...) inside which a
-- memory copy was launched (the memcpy's launch call falls within the op on its thread), unless a
-- recorded `aten::copy_` inside it has two input dtypes (a conversion made with the copy): `x.to('cuda')`,
-- `.cpu()`, `lengths.to(device)`. Its time is the copy's and the wait for it (a device-to-host copy
-- waits for the GPU's queue), not a cast's: the cast metrics leave it out. Each op is matched with the
-- first launch and the first converting copy of its thread at or after its start (ASOF joins over the
-- thread's events in time order, not every pair of an op and a copy of its thread).
-- Reads: events(kind, name, pid, tid, ts_ns, dur_ns, event_id, launch_id, input_dtypes), _cast_ops.
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   event_id  BIGINT   the op
WITH names AS (
  SELECT DISTINCT n.name FROM (SELECT DISTINCT name FROM events WHERE kind IN ('op', 'op_inner')) n
  CROSS JOIN _cast_ops c WHERE regexp_matches(n.name, c.family)
),
family AS (
  SELECT e.run_id, e.rank, e.pid, e.tid, e.event_id, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns
  FROM events e JOIN names USING (name)
  WHERE e.kind IN ('op', 'op_inner')
),
copies AS (  -- the host call that launched each memory copy
  SELECT r.run_id, r.rank, r.pid, r.tid, r.ts_ns
  FROM events g JOIN events r ON r.run_id = g.run_id AND r.rank = g.rank AND r.event_id = g.launch_id
  WHERE g.kind = 'memcpy'
),
converting AS (  -- copies between two recorded dtypes
  SELECT run_id, rank, pid, tid, ts_ns FROM events
  WHERE kind IN ('op', 'op_inner') AND name = 'aten::copy_'
    AND len(list_distinct(list_filter(input_dtypes, lambda x: x <> ''))) > 1
),
launching AS (  -- family ops with a copy launched inside them
  SELECT f.*
  FROM family f
  ASOF JOIN copies c ON c.run_id = f.run_id AND c.rank = f.rank AND c.pid = f.pid AND c.tid = f.tid
   AND c.ts_ns >= f.ts_ns
  WHERE c.ts_ns < f.end_ns
)
SELECT l.run_id, l.rank, l.event_id
FROM launching l
ASOF LEFT JOIN converting x ON x.run_id = l.run_id AND x.rank = l.rank AND x.pid = l.pid AND x.tid = l.tid
 AND x.ts_ns >= l.ts_ns
WHERE x.ts_ns IS NULL OR x.ts_ns >= l.end_ns
