-- _gpu_islands: maximal busy intervals of each device in each window (the union of its GPU work).
-- Requires: _gpu_work
-- Definition: GPU work intervals of a device in a window, across all streams, sorted by start (then
-- event id); an interval starting after every earlier one has ended opens a new island (touching
-- intervals merge), which ends where the next island's opener finds all earlier work ended.
-- work_set 'all' covers kernels, memcpy and memset; 'kernel' covers kernels only; 'comm' covers
-- communication kernels (kernel_class 'comm': NCCL/RCCL collectives) and, in windows that have any,
-- 'not_comm' covers all the other work, so that 'all' minus 'not_comm' is the communication time no
-- other GPU work hides (windows without collectives skip that third pass over their work).
-- Reads: _gpu_work, kernel_classes(name, kernel_class).
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  window's step
--   device          INTEGER  GPU index
--   work_set        VARCHAR  'all', 'kernel', 'comm' or 'not_comm'
--   island          BIGINT   island number within the window and device, in time order (1, 2, ...)
--   start_ns        BIGINT   island start, ns
--   end_ns          BIGINT   island end, ns
--   first_event_id  BIGINT   the island's earliest-starting GPU event (lowest event id on a tie)
--   first_launch_id BIGINT   the runtime call that launched that event
--   prev_end_ns     BIGINT   end of the previous island of the set (NULL for the first)
--   prev_event_id   BIGINT   first_event_id of the previous island (NULL for the first)
WITH comm AS (
  SELECT g.* FROM _gpu_work g
  JOIN kernel_classes c ON c.run_id = g.run_id AND c.rank = g.rank AND c.name = g.name
  WHERE g.kind = 'kernel' AND c.kernel_class = 'comm'
),
comm_windows AS (
  SELECT DISTINCT run_id, rank, step, device FROM comm
),
work AS (
  SELECT run_id, rank, step, device, 'all' AS work_set, event_id, launch_id, start_ns, end_ns FROM _gpu_work
  UNION ALL
  SELECT run_id, rank, step, device, 'kernel', event_id, launch_id, start_ns, end_ns FROM _gpu_work
  WHERE kind = 'kernel'
  UNION ALL
  SELECT run_id, rank, step, device, 'comm', event_id, launch_id, start_ns, end_ns FROM comm
  UNION ALL
  SELECT g.run_id, g.rank, g.step, g.device, 'not_comm', g.event_id, g.launch_id, g.start_ns, g.end_ns
  FROM _gpu_work g
  SEMI JOIN comm_windows c
    ON c.run_id = g.run_id AND c.rank = g.rank AND c.step IS NOT DISTINCT FROM g.step AND c.device = g.device
  ANTI JOIN comm x ON x.run_id = g.run_id AND x.rank = g.rank AND x.event_id = g.event_id
),
reached AS (  -- reach: the latest end of all work before this one in start order
  SELECT *,
         max(end_ns) OVER (PARTITION BY run_id, rank, step, device, work_set ORDER BY start_ns, event_id
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM work
),
openers AS (  -- the first work of each island: it starts after all earlier work has ended
  SELECT * FROM reached WHERE reach IS NULL OR start_ns > reach
),
last_end AS (  -- an island ends where the next one's reach is; the last one at the set's last end
  SELECT run_id, rank, step, device, work_set, max(end_ns) AS end_ns
  FROM work GROUP BY run_id, rank, step, device, work_set
)
SELECT o.run_id, o.rank, o.step, o.device, o.work_set,
       row_number() OVER islands AS island,
       o.start_ns,
       coalesce(lead(o.reach) OVER islands, e.end_ns) AS end_ns,
       o.event_id AS first_event_id,
       o.launch_id AS first_launch_id,
       o.reach AS prev_end_ns,
       lag(o.event_id) OVER islands AS prev_event_id
FROM openers o
JOIN last_end e
  ON e.run_id = o.run_id AND e.rank = o.rank AND e.step IS NOT DISTINCT FROM o.step AND e.device = o.device
 AND e.work_set = o.work_set
WINDOW islands AS (PARTITION BY o.run_id, o.rank, o.step, o.device, o.work_set ORDER BY o.start_ns, o.event_id)
