-- cast_overhead: dtype conversions, what they cost, and fp32 -> fp16 -> fp32 round trips.
-- Requires: _windows, _cast_ops
-- Definition: conversions and the cast family are defined in _cast_ops, plus an `aten::copy_` whose
-- recorded input dtypes differ (unless it is the body of another conversion); calls counts conversions
-- starting in the window. Their cost is measured on the outermost cast-family op around them (e.g.
-- `evaluate_function: ToCopyBackward0` > `aten::to` > `aten::_to_copy` > `aten::copy_`): cpu_ns sums those
-- ops' durations (dispatch included), gpu_ns the GPU work launched from calls inside them. A family op
-- that converts nothing (an `aten::to` to the same dtype) costs nothing here. round_trips counts, per
-- window and tensor shape, pairs of conversions of that shape from float and from half (needs recorded
-- shapes and dtypes: PyTorch `record_shapes=True`; NULL elsewhere).
-- Reads: events, _windows, _cast_ops.
-- Columns:
--   run_id       VARCHAR  run id
--   rank         BIGINT   rank
--   step         INTEGER  window's step
--   window_ns    BIGINT   window length, ns
--   calls        BIGINT   conversions
--   cpu_ns       BIGINT   CPU time of the cast ops around them, ns
--   gpu_ns       BIGINT   GPU time of the work those ops launched, ns
--   kernels      BIGINT   GPU events those ops launched
--   cpu_share    DOUBLE   cpu_ns / window_ns
--   round_trips  BIGINT   float -> half -> float round trips on one shape (NULL without shapes)
WITH family AS (
  SELECT e.*, w.step, w.win_end - w.win_start AS window_ns,
         regexp_matches(e.name, c.conversion)
           OR (e.name = 'aten::copy_' AND len(list_distinct(list_filter(e.input_dtypes, lambda x: x <> ''))) > 1)
           AS converts
  FROM events e
  CROSS JOIN _cast_ops c
  JOIN _windows w ON e.run_id = w.run_id AND e.rank = w.rank AND e.ts_ns >= w.win_start AND e.ts_ns < w.win_end
  WHERE e.kind = 'op' AND (regexp_matches(e.name, c.family) OR e.name = 'aten::copy_')
),
conversions AS (
  SELECT * FROM family f
  WHERE converts AND NOT EXISTS (  -- a copy_ inside a _to_copy is the same conversion
    SELECT 1 FROM family p WHERE p.run_id = f.run_id AND p.rank = f.rank AND p.event_id = f.parent_id AND p.converts)
),
outermost AS (  -- cast-family ops not inside another one, that contain a conversion (or are one)
  SELECT DISTINCT o.* EXCLUDE (converts)
  FROM family o
  JOIN conversions c ON c.run_id = o.run_id AND c.rank = o.rank AND c.pid = o.pid AND c.tid = o.tid
   AND c.ts_ns >= o.ts_ns AND c.ts_ns + c.dur_ns <= o.ts_ns + o.dur_ns
  LEFT JOIN family p ON p.run_id = o.run_id AND p.rank = o.rank AND p.event_id = o.parent_id
  WHERE p.event_id IS NULL
),
launched AS (
  SELECT o.run_id, o.rank, o.event_id, sum(g.dur_ns) AS gpu_ns, count(*) AS kernels
  FROM outermost o
  JOIN events r ON r.run_id = o.run_id AND r.rank = o.rank AND r.kind = 'runtime' AND r.pid = o.pid
   AND r.tid = o.tid AND r.ts_ns >= o.ts_ns AND r.ts_ns < o.ts_ns + o.dur_ns
  JOIN events g ON g.run_id = r.run_id AND g.rank = r.rank AND g.launch_id = r.event_id
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
