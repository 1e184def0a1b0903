-- _thread_names: the names the trace gives each rank's host threads.
-- Definition: the threads table's name of each (pid, tid) of a rank.
-- Reads: threads(run_id, rank, pid, tid, name).
-- Columns:
--   run_id  VARCHAR  run id
--   rank    BIGINT   rank
--   pid     BIGINT   process
--   tid     BIGINT   thread
--   name    VARCHAR  its name
SELECT run_id, rank, pid, tid, name FROM threads
