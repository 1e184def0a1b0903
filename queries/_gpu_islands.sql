-- _gpu_islands: maximal busy intervals of each device in each window (the union of its GPU work).
-- Requires: _gpu_reach
-- Definition: GPU work (kernels, memcpy, memset) of a device in a window, across all streams, in start
-- order (then event id); an interval starting after every earlier one has ended (after its reach) opens
-- a new island (touching intervals merge), which ends where the next island's opener finds all earlier
-- work ended, the last one at the latest end of the window's work.
-- Reads: _gpu_reach.
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  window's step
--   device          INTEGER  GPU index
--   island          BIGINT   island number within the window and device, in time order (1, 2, ...)
--   start_ns        BIGINT   island start, ns
--   end_ns          BIGINT   island end, ns
--   first_event_id  BIGINT   the island's earliest-starting GPU event (lowest event id on a tie)
--   first_launch_id BIGINT   the runtime call that launched that event
--   prev_end_ns     BIGINT   end of the previous island (NULL for the first)
--   prev_event_id   BIGINT   first_event_id of the previous island (NULL for the first)
WITH openers AS (  -- the first work of each island: it starts after all earlier work has ended
  SELECT *, max(end_ns) OVER (PARTITION BY run_id, rank, step, device) AS last_end
  FROM _gpu_reach
  QUALIFY reach IS NULL OR start_ns > reach
)
SELECT run_id, rank, step, device,
       row_number() OVER islands AS island,
       start_ns,
       coalesce(lead(reach) OVER islands, last_end) AS end_ns,
       event_id AS first_event_id,
       launch_id AS first_launch_id,
       reach AS prev_end_ns,
       lag(event_id) OVER islands AS prev_event_id
FROM openers
WINDOW islands AS (PARTITION BY run_id, rank, step, device ORDER BY start_ns, event_id)
