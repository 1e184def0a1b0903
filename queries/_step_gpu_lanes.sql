-- _step_gpu_lanes: the GPU work of each run's representative step, to draw on a lane per device and stream.
-- Requires: _typical_step, _gpu_work
-- Definition: the work of _gpu_work (kernels, memcpy, memset, clipped to the window) in the window of
-- _typical_step, with its stream, name and kernel class (memcpy and memset: their kind), times from the
-- window's start.
-- Reads: _typical_step, _gpu_work, events(event_id, stream, name).
-- Columns:
--   run_id        VARCHAR  run id
--   rank          BIGINT   rank
--   device        INTEGER  GPU index
--   stream        BIGINT   GPU stream
--   kind          VARCHAR  kernel, memcpy or memset
--   kernel_class  VARCHAR  the kernel's class (gemm, conv, cast, ...); memcpy or memset for copies and sets
--   name          VARCHAR  the GPU event's name
--   start_ns      BIGINT   start inside the window, ns from its start
--   end_ns        BIGINT   end inside the window, ns from its start
SELECT g.run_id, g.rank, g.device, e.stream, g.kind, coalesce(g.kernel_class, g.kind) AS kernel_class, e.name,
       g.start_ns - m.win_start AS start_ns, g.end_ns - m.win_start AS end_ns
FROM _typical_step m
JOIN _gpu_work g ON g.run_id = m.run_id AND g.rank = m.rank AND g.step IS NOT DISTINCT FROM m.step
JOIN events e ON e.run_id = g.run_id AND e.rank = g.rank AND e.event_id = g.event_id
ORDER BY g.run_id, g.device, e.stream, g.start_ns
