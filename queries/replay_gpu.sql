-- replay_gpu: the GPU work a replay of the timeline runs, with its launch call and kernel class.
-- Definition: every kernel, copy and set, with its device and stream, its launch call (launch_id, NULL
-- where the launch was not captured), the step of its launch, and its class from kernel_classes.
-- Reads: events(run_id, rank, event_id, kind, name, device, stream, ts_ns, dur_ns, launch_id, step), kernel_classes.
-- Columns:
--   run_id        VARCHAR  run id
--   rank          BIGINT   rank
--   event_id      BIGINT   the GPU event
--   kind          VARCHAR  kernel, memcpy or memset
--   name          VARCHAR  kernel or copy name
--   device        INTEGER  GPU index
--   stream        BIGINT   GPU stream
--   ts_ns         BIGINT   start, ns
--   end_ns        BIGINT   end, ns
--   launch_id     BIGINT   the runtime call that launched it
--   step          INTEGER  step of its launch
--   kernel_class  VARCHAR  class of the kernel name (see kernel_classes)
SELECT e.run_id, e.rank, e.event_id, e.kind, e.name, e.device, e.stream, e.ts_ns, e.ts_ns + e.dur_ns AS end_ns,
       e.launch_id, e.step, c.kernel_class
FROM events e
LEFT JOIN kernel_classes c ON c.run_id = e.run_id AND c.rank = e.rank AND c.name = e.name
WHERE is_gpu_work(e.kind)
