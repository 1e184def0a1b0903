-- host_calls: per host step, the calls that can hold the host: syncs, allocations, data loading, pageable copies.
-- Requires: _call_causes, _pageable_copies
-- Definition: for each host step (the `step` of the event), the runtime calls whose name stands for
-- host_sync or allocator (see _call_causes), the data-loading ranges (input_pipeline names; top-level
-- ranges only, so a DataLoader call is counted once, not once per frame inside it) and the pageable
-- host-to-device copies (see _pageable_copies), each counted by name with their summed host time (for
-- copies, their device time) and bytes.
-- Reads: events(kind, name, step, dur_ns, depth, parent_id, event_id), _call_causes, _pageable_copies.
-- Columns:
--   run_id  VARCHAR  run id
--   rank    BIGINT   rank
--   step    INTEGER  host step
--   cause   VARCHAR  host_sync, allocator or input_pipeline
--   name    VARCHAR  call name (for copies, the copy's name)
--   calls   BIGINT   calls in the step
--   dur_ns  BIGINT   their summed duration, ns
--   bytes   BIGINT   bytes copied (copies only)
WITH named AS (
  SELECT e.run_id, e.rank, e.step, c.cause, e.name, e.dur_ns, e.kind, e.event_id, e.parent_id
  FROM events e JOIN _call_causes c ON c.kind = e.kind AND c.name = e.name
  WHERE holds_host_inner(c.cause) OR c.cause = 'input_pipeline'
),
data_tops AS (  -- data-loading ranges not inside another one (on a thread they do not overlap each other)
  SELECT d.* FROM named d
  WHERE d.cause = 'input_pipeline' AND d.kind <> 'python'
)
SELECT run_id, rank, step, cause, name, count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns, NULL::BIGINT AS bytes
FROM named WHERE holds_host_inner(cause) AND kind = 'runtime'
GROUP BY ALL
UNION ALL
SELECT run_id, rank, step, cause, name, count(*) AS calls, sum(dur_ns)::BIGINT AS dur_ns, NULL::BIGINT AS bytes
FROM data_tops d
WHERE NOT EXISTS (SELECT 1 FROM data_tops p WHERE p.run_id = d.run_id AND p.rank = d.rank AND p.event_id = d.parent_id)
GROUP BY ALL
UNION ALL
SELECT p.run_id, p.rank, p.step, 'input_pipeline' AS cause, e.name, count(*) AS calls, sum(e.dur_ns)::BIGINT AS dur_ns,
       sum(p.bytes)::BIGINT AS bytes
FROM _pageable_copies p JOIN events e ON e.run_id = p.run_id AND e.rank = p.rank AND e.event_id = p.event_id
GROUP BY ALL
ORDER BY run_id, rank, step, cause, dur_ns DESC
