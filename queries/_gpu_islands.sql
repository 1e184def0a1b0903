-- _gpu_islands: maximal busy intervals of each device in each window (the union of its GPU work).
-- Requires: _gpu_work
-- Definition: GPU work intervals of a device in a window, across all streams, sorted by start; an
-- interval starting after every earlier one has ended opens a new island (touching intervals merge).
-- work_set 'all' covers kernels, memcpy and memset; 'kernel' covers kernels only; 'not_comm' covers
-- all but communication kernels (kernel_class 'comm': NCCL/RCCL collectives), so that 'all' minus
-- 'not_comm' is the communication time no other GPU work hides.
-- Reads: _gpu_work, kernel_classes(name, kernel_class).
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  window's step
--   device          INTEGER  GPU index
--   work_set        VARCHAR  'all', 'kernel' or 'not_comm'
--   island          BIGINT   island number within the window and device, in time order (1, 2, ...)
--   start_ns        BIGINT   island start, ns
--   end_ns          BIGINT   island end, ns
--   first_event_id  BIGINT   the island's earliest-starting GPU event
--   first_launch_id BIGINT   the runtime call that launched that event
WITH work AS (
  SELECT run_id, rank, step, device, 'all' AS work_set, event_id, launch_id, start_ns, end_ns FROM _gpu_work
  UNION ALL
  SELECT run_id, rank, step, device, 'kernel', event_id, launch_id, start_ns, end_ns FROM _gpu_work
  WHERE kind = 'kernel'
  UNION ALL
  SELECT g.run_id, g.rank, g.step, g.device, 'not_comm', g.event_id, g.launch_id, g.start_ns, g.end_ns
  FROM _gpu_work g
  LEFT JOIN kernel_classes c ON c.run_id = g.run_id AND c.rank = g.rank AND c.name = g.name
  WHERE g.kind <> 'kernel' OR c.kernel_class IS DISTINCT FROM 'comm'
),
ordered AS (
  SELECT *,
         max(end_ns) OVER (PARTITION BY run_id, rank, step, device, work_set ORDER BY start_ns, end_ns, event_id
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM work
),
numbered AS (
  SELECT *,
         sum(CASE WHEN reach IS NULL OR start_ns > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY run_id, rank, step, device, work_set ORDER BY start_ns, end_ns, event_id
                 ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
)
SELECT run_id, rank, step, device, work_set, island::BIGINT AS island,
       min(start_ns) AS start_ns, max(end_ns) AS end_ns,
       arg_min(event_id, (start_ns, event_id)) AS first_event_id,
       arg_min(launch_id, (start_ns, event_id)) AS first_launch_id
FROM numbered
GROUP BY run_id, rank, step, device, work_set, island
