-- _step_idle_lanes: the GPU idle time of each run's representative step, by cause, to draw on a lane per device.
-- Requires: _typical_step, _idle_pieces
-- Definition: the pieces of _idle_pieces (each idle interval cut by cause) in the window of _typical_step,
-- times from the window's start; the pieces of a window add up to its idle time (gpu_busy.idle_ns).
-- Reads: _typical_step, _idle_pieces.
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   device    INTEGER  GPU index
--   cause     VARCHAR  the cause (see idle_causes)
--   start_ns  BIGINT   start of the piece, ns from the window's start
--   end_ns    BIGINT   end of the piece, ns from the window's start
SELECT p.run_id, p.rank, p.device, p.cause, p.piece_start - m.win_start AS start_ns,
       p.piece_end - m.win_start AS end_ns
FROM _typical_step m
JOIN _idle_pieces p ON p.run_id = m.run_id AND p.rank = m.rank AND p.step IS NOT DISTINCT FROM m.step
WHERE p.piece_end > p.piece_start
ORDER BY p.run_id, p.device, p.piece_start
