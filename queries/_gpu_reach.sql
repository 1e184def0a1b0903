-- _gpu_reach: each GPU work interval with how far the device's earlier work in its window reached.
-- Requires: _gpu_work
-- Definition: the GPU work of a device in a window in start order (then event id), across all streams;
-- reach is the latest end of all the work before an interval, kernel_reach of the kernels before it,
-- not_comm_reach of the work before it other than communication kernels (kernel_class 'comm': NCCL/RCCL
-- collectives). An interval starting after reach opens a busy island; the part of an interval past the
-- reach of its set (end_ns - greatest(start_ns, reach), when positive) is what it adds to the union of
-- that set's work, so a union's length is the sum of those parts. One ordered pass serves every set.
-- Reads: _gpu_work.
-- Columns:
--   run_id          VARCHAR  run id
--   rank            BIGINT   rank
--   step            INTEGER  window's step
--   device          INTEGER  GPU index
--   kind            VARCHAR  kernel, memcpy or memset
--   comm            BOOLEAN  a communication kernel
--   event_id        BIGINT   the GPU event
--   launch_id       BIGINT   the runtime call that launched it
--   start_ns        BIGINT   start inside the window, ns
--   end_ns          BIGINT   end inside the window, ns
--   reach           BIGINT   latest end of the earlier work (NULL for the first)
--   kernel_reach    BIGINT   latest end of the earlier kernels (NULL: none)
--   not_comm_reach  BIGINT   latest end of the earlier work other than communication kernels (NULL: none)
SELECT g.run_id, g.rank, g.step, g.device, g.kind,
       g.kernel_class IS NOT DISTINCT FROM 'comm' AS comm,
       g.event_id, g.launch_id, g.start_ns, g.end_ns,
       max(g.end_ns) OVER earlier AS reach,
       max(g.end_ns) FILTER (WHERE g.kind = 'kernel') OVER earlier AS kernel_reach,
       max(g.end_ns) FILTER (WHERE g.kernel_class IS DISTINCT FROM 'comm') OVER earlier AS not_comm_reach
FROM _gpu_work g
WINDOW earlier AS (PARTITION BY g.run_id, g.rank, g.step, g.device ORDER BY g.start_ns, g.event_id
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
