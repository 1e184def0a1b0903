-- rank_balance: how evenly the ranks of a run share each step, and which rank the others wait for.
-- Requires: gpu_busy, launch_bound
-- Definition: per step and rank (a rank's devices combined by taking the largest value), work_ns =
-- window_ns - exposed_comm_ns: the step's time outside collectives that no other GPU work hides. Ranks
-- synchronise in collectives, so a rank with less work reaches them earlier and waits there for the
-- others; the rank with the most work in a step is that step's straggler, and every rank's wait_ns is
-- the straggler's work_ns minus its own. Steps are matched across ranks by step number (a run without
-- steps has one window per rank); ranks' clocks need not agree.
-- Reads: gpu_busy, launch_bound.
-- Columns:
--   run_id              VARCHAR  run id
--   step                INTEGER  step number (NULL: a run without steps)
--   rank                BIGINT   rank
--   ranks               BIGINT   ranks with this step
--   window_ns           BIGINT   the rank's step window, ns
--   busy_ns             BIGINT   union of the rank's GPU work in the window, ns
--   idle_ratio          DOUBLE   1 - busy_ns / window_ns
--   exposed_comm_ns     BIGINT   communication kernel time not hidden by other GPU work, ns
--   host_launch_gap_ns  BIGINT   GPU idle waiting for the CPU to launch work, ns
--   launch_bound_ratio  DOUBLE   host_launch_gap_ns / window_ns
--   work_ns             BIGINT   window_ns - exposed_comm_ns
--   wait_ns             BIGINT   the step's largest work_ns minus this rank's
--   is_straggler        BOOLEAN  this rank has the step's largest work_ns (the lowest rank on ties)
WITH per_rank AS (
  SELECT b.run_id, b.step, b.rank,
         max(b.window_ns) AS window_ns, max(b.busy_ns) AS busy_ns, max(b.exposed_comm_ns) AS exposed_comm_ns,
         max(coalesce(l.host_launch_gap_ns, 0)) AS host_launch_gap_ns
  FROM gpu_busy b
  LEFT JOIN launch_bound l ON l.run_id = b.run_id AND l.rank = b.rank AND l.step IS NOT DISTINCT FROM b.step
   AND l.device = b.device
  GROUP BY b.run_id, b.step, b.rank
),
worked AS (
  SELECT *, window_ns - exposed_comm_ns AS work_ns FROM per_rank
)
SELECT run_id, step, rank,
       count(*) OVER step_ranks AS ranks,
       window_ns::BIGINT AS window_ns, busy_ns::BIGINT AS busy_ns,
       1 - busy_ns / window_ns AS idle_ratio,
       exposed_comm_ns::BIGINT AS exposed_comm_ns, host_launch_gap_ns::BIGINT AS host_launch_gap_ns,
       host_launch_gap_ns / window_ns AS launch_bound_ratio,
       work_ns::BIGINT AS work_ns,
       (max(work_ns) OVER step_ranks - work_ns)::BIGINT AS wait_ns,
       row_number() OVER (PARTITION BY run_id, step ORDER BY work_ns DESC, rank) = 1 AS is_straggler
FROM worked
WINDOW step_ranks AS (PARTITION BY run_id, step)
ORDER BY run_id, step, rank
