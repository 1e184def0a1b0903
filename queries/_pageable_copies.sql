-- _pageable_copies: host-to-device copies from pageable host memory, and the op that made each.
-- Definition: memcpy GPU work whose name says it copied from pageable host memory to the device
-- (PyTorch `Memcpy HtoD (Pageable -> Device)`): the host waits for such a copy (the driver stages it
-- through a pinned buffer), unlike a copy from pinned memory.
-- Reads: events(kind, name, op_id, step, bytes, event_id).
-- Columns:
--   run_id    VARCHAR  run id
--   rank      BIGINT   rank
--   event_id  BIGINT   the copy
--   op_id     BIGINT   the op that made it (NULL: none captured)
--   step      INTEGER  host step of its launch
--   bytes     BIGINT   bytes copied
SELECT run_id, rank, event_id, op_id, step, bytes
FROM events
WHERE kind = 'memcpy' AND regexp_matches(name, '(?i)htod.*pageable|pageable.*device')
