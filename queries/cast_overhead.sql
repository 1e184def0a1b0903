-- cast_overhead: dtype conversions, what they cost, and fp32 -> fp16 -> fp32 round trips.
-- Requires: _windows, _cast_ops, _device_copies
-- Definition: conversions and the cast family are defined in _cast_ops (ops and inner ops: Paddle records nested
-- operators as inner ops), plus an `aten::copy_` whose
-- recorded input dtypes differ (unless it is the body of another conversion); calls counts conversions
-- starting in the window. Their cost is measured on the outermost cast-family op around them (e.g.
-- `evaluate_function: ToCopyBackward0` > `aten::to` > `aten::_to_copy` > `aten::copy_`): cpu_ns sums those
-- ops' durations (dispatch included), gpu_ns the kernels launched from calls inside them (a device copy
-- inside `aten::to` is a memory copy, not a cast). A family op
-- that converts nothing (an `aten::to` to the same dtype) costs nothing here, and one that moved a tensor
-- between host and device (_device_copies: `.cpu()`, `x.to('cuda')`, with the wait for the copy) is no
-- conversion. round_trips counts, per
-- window and tensor shape, pairs of conversions of that shape from float and from half (needs recorded
-- shapes and dtypes: PyTorch `record_shapes=True`; NULL elsewhere).
-- Reads: events, _windows, _cast_ops, _device_copies.
-- Columns:
--   run_id       VARCHAR  run id
--   rank         BIGINT   rank
--   step         INTEGER  window's step
--   window_ns    BIGINT   window length, ns
--   calls        BIGINT   conversions
--   cpu_ns       BIGINT   CPU time of the cast ops around them, ns
--   gpu_ns       BIGINT   GPU time of the kernels those ops launched, ns
--   kernels      BIGINT   kernels those ops launched
--   cpu_share    DOUBLE   cpu_ns / window_ns
--   round_trips  BIGINT   float -> half -> float round trips on one shape (NULL without shapes)
WITH op_names AS (  -- the patterns are columns, so match each distinct op name once, not every call
  SELECT n.name, regexp_matches(n.name, c.family) AS in_family, regexp_matches(n.name, c.conversion) AS is_conversion
  FROM (SELECT DISTINCT name FROM events WHERE kind IN ('op', 'op_inner')) n
  CROSS JOIN _cast_ops c
),
family AS (
  SELECT e.*, w.step, w.win_end - w.win_start AS window_ns,
         n.is_conversion
           OR (e.name = 'aten::copy_' AND len(list_distinct(list_filter(e.input_dtypes, lambda x: x <> ''))) > 1)
           AS converts
  FROM events e
  JOIN op_names n ON n.name = e.name
  JOIN _windows w  -- an op's step is the window its start falls in: match on it, then check the range
    ON e.run_id = w.run_id AND e.rank = w.rank AND e.step IS NOT DISTINCT FROM w.step
   AND (w.step IS NOT NULL OR (e.ts_ns >= w.win_start AND e.ts_ns < w.win_end))
  WHERE e.kind IN ('op', 'op_inner') AND (n.in_family OR e.name = 'aten::copy_')
    AND NOT EXISTS (SELECT 1 FROM _device_copies d
                    WHERE d.run_id = e.run_id AND d.rank = e.rank AND d.event_id = e.event_id)
),
conversions AS (
  SELECT * FROM family f
  WHERE converts AND NOT EXISTS (  -- a copy_ inside a _to_copy is the same conversion
    SELECT 1 FROM family p WHERE p.run_id = f.run_id AND p.rank = f.rank AND p.event_id = f.parent_id AND p.converts)
),
tops AS (  -- cast-family ops not inside another one (on a thread they do not overlap each other)
  SELECT f.*
  FROM family f
  LEFT JOIN family p ON p.run_id = f.run_id AND p.rank = f.rank AND p.event_id = f.parent_id
  WHERE p.event_id IS NULL
),
owners AS (  -- the top family op enclosing each conversion: the last one on its thread starting by then
  -- (a window over the thread's tops and conversions in time order, a top before a conversion at one instant)
  SELECT run_id, rank, top_id AS event_id
  FROM (
    SELECT *, last_value(CASE WHEN NOT is_conversion THEN event_id END IGNORE NULLS) OVER w AS top_id,
              last_value(CASE WHEN NOT is_conversion THEN end_ns END IGNORE NULLS) OVER w AS top_end
    FROM (SELECT run_id, rank, pid, tid, event_id, ts_ns, ts_ns + dur_ns AS end_ns, false AS is_conversion FROM tops
          UNION ALL
          SELECT run_id, rank, pid, tid, event_id, ts_ns, ts_ns + dur_ns, true FROM conversions)
    WHERE pid IS NOT NULL AND tid IS NOT NULL AND ts_ns IS NOT NULL
    WINDOW w AS (PARTITION BY run_id, rank, pid, tid ORDER BY ts_ns, is_conversion ROWS UNBOUNDED PRECEDING))
  WHERE is_conversion AND end_ns <= top_end
),
outermost AS (  -- top family ops that contain a conversion (or are one)
  SELECT t.* EXCLUDE (converts)
  FROM tops t
  WHERE EXISTS (SELECT 1 FROM owners o WHERE o.run_id = t.run_id AND o.rank = t.rank AND o.event_id = t.event_id)
),
launches AS (  -- kernels and the runtime call that launched each (a copy is a copy, not a cast)
  SELECT r.run_id, r.rank, r.pid, r.tid, r.ts_ns, g.dur_ns
  FROM events g
  JOIN events r ON r.run_id = g.run_id AND r.rank = g.rank AND r.event_id = g.launch_id AND r.kind = 'runtime'
  WHERE g.kind = 'kernel'
),
launched AS (  -- GPU work launched from inside each outermost op
  SELECT o.run_id, o.rank, o.event_id, sum(l.dur_ns) AS gpu_ns, count(*) AS kernels
  FROM launches l
  ASOF JOIN outermost o
    ON o.run_id = l.run_id AND o.rank = l.rank AND o.pid = l.pid AND o.tid = l.tid AND l.ts_ns >= o.ts_ns
  WHERE l.ts_ns < o.ts_ns + o.dur_ns
  GROUP BY ALL
),
cost AS (
  SELECT o.run_id, o.rank, o.step, sum(o.dur_ns) AS cpu_ns, sum(l.gpu_ns) AS gpu_ns, sum(l.kernels) AS kernels
  FROM outermost o LEFT JOIN launched l USING (run_id, rank, event_id)
  GROUP BY ALL
),
shapes AS (
  SELECT run_id, rank, step, input_shapes,
         count(*) FILTER (WHERE input_dtypes[1] IN ('float', 'float32')) AS from_float,
         count(*) FILTER (WHERE input_dtypes[1] IN ('c10::Half', 'float16', 'c10::BFloat16', 'bfloat16')) AS from_half
  FROM conversions
  WHERE input_shapes IS NOT NULL AND input_dtypes IS NOT NULL
  GROUP BY ALL
),
trips AS (
  SELECT run_id, rank, step, sum(least(from_float, from_half))::BIGINT AS round_trips FROM shapes GROUP BY ALL
),
counts AS (
  SELECT run_id, rank, step, any_value(window_ns) AS window_ns, count(*) AS calls FROM conversions GROUP BY ALL
)
SELECT n.run_id, n.rank, n.step, n.window_ns::BIGINT AS window_ns, n.calls,
       coalesce(c.cpu_ns, 0)::BIGINT AS cpu_ns, coalesce(c.gpu_ns, 0)::BIGINT AS gpu_ns,
       coalesce(c.kernels, 0)::BIGINT AS kernels,
       coalesce(c.cpu_ns, 0) / n.window_ns AS cpu_share,
       t.round_trips
FROM counts n
LEFT JOIN cost c ON c.run_id = n.run_id AND c.rank = n.rank AND c.step IS NOT DISTINCT FROM n.step
LEFT JOIN trips t ON t.run_id = n.run_id AND t.rank = n.rank AND t.step IS NOT DISTINCT FROM n.step
ORDER BY n.run_id, n.rank, n.step
