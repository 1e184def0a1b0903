-- _trace_events: every event with its track in a trace viewer and the links its args may lack.
-- Requires: _event_lanes
-- Definition: the event's own columns with its track and lane (_event_lanes); `link` is the launch
-- correlation a trace file gives a runtime call and the GPU work it launched: the call's own event id
-- (unique in the rank); `add_device` and `add_stream` are the device and stream of GPU work on a GPU
-- track (for args that lack them: nsys keeps them in columns).
-- Reads: events(run_id, rank, event_id, kind, category, name, ts_ns, dur_ns, launch_id, args), _event_lanes.
-- Columns:
--   run_id      VARCHAR  run id
--   side        VARCHAR  gpu or host (see _event_lanes)
--   proc        BIGINT   the track's process: device or pid
--   thread      BIGINT   the track: stream or tid
--   lane        INTEGER  the lane beside the track (see _event_lanes)
--   rank        BIGINT   rank
--   event_id    BIGINT   the event
--   kind        VARCHAR  its kind
--   category    VARCHAR  its category in the trace
--   name        VARCHAR  its name
--   ts_ns       BIGINT   start, ns
--   dur_ns      BIGINT   duration, ns (NULL for instants)
--   launch_id   BIGINT   the runtime call that launched it (GPU work)
--   args        VARCHAR  its args as recorded (JSON text)
--   link        BIGINT   launch correlation: a runtime call's event id, GPU work's launch id
--   add_device  BIGINT   GPU work on a GPU track: its device
--   add_stream  BIGINT   GPU work on a GPU track: its stream
SELECT e.run_id, l.side, l.proc, l.thread, l.lane, e.rank, e.event_id, e.kind, e.category, e.name, e.ts_ns,
       e.dur_ns, e.launch_id, e.args,
       CASE WHEN e.kind = 'runtime' THEN e.event_id WHEN l.work THEN e.launch_id END AS link,
       CASE WHEN l.work AND l.side = 'gpu' THEN l.proc END AS add_device,
       CASE WHEN l.work AND l.side = 'gpu' THEN l.thread END AS add_stream
FROM events e
JOIN _event_lanes l ON l.run_id = e.run_id AND l.rank = e.rank AND l.event_id = e.event_id
