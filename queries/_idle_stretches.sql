-- _idle_stretches: each stretch of a GPU's idle time of one cause and call, with the call and the ops around it.
-- Requires: _idle_charges
-- Definition: the pieces of _idle_charges that follow each other without a break on one device's track
-- (rank and device) within one gap and share their cause, step, call, Python frame and thread are one
-- stretch (a gap is cut into pieces where the host thread's marked calls begin and end, leaving out only the
-- calls nested in an op that can change neither, so some pieces still continue the one before: 55,759
-- pieces, 54,949 stretches on a 38.5 MB trace; 183,649 pieces when every call cut). The call is named with
-- the op that made it where it is a runtime call, and the top-level op around it, each where it differs.
-- Reads: _idle_charges, events(run_id, rank, event_id, kind, name, parent_id, top_op_id).
-- Columns:
--   run_id       VARCHAR  run id
--   rank         BIGINT   rank
--   device       INTEGER  GPU index
--   piece_start  BIGINT   start of the stretch, ns
--   ns           BIGINT   its length, ns
--   cause        VARCHAR  the cause (see idle_causes)
--   step         INTEGER  window's step
--   call         VARCHAR  the host call it is charged to (NULL: none)
--   op           VARCHAR  the op that made that call, where it is a runtime call and not the call itself
--   top_op       VARCHAR  the top-level op around the call, where it is neither of those
--   frame        VARCHAR  innermost frame of the user's Python code around it (NULL: not recorded or none)
--   thread       VARCHAR  the host thread that explains it, `pid/tid` (NULL: none)
WITH opened AS (  -- 1 where a piece does not continue the one before it on its device's track
  SELECT *,
         CASE WHEN piece_start = lag(piece_end) OVER w
               AND gap_id IS NOT DISTINCT FROM lag(gap_id) OVER w AND cause IS NOT DISTINCT FROM lag(cause) OVER w
               AND step IS NOT DISTINCT FROM lag(step) OVER w AND site_id IS NOT DISTINCT FROM lag(site_id) OVER w
               AND frame IS NOT DISTINCT FROM lag(frame) OVER w AND pid IS NOT DISTINCT FROM lag(pid) OVER w
               AND tid IS NOT DISTINCT FROM lag(tid) OVER w THEN 0 ELSE 1 END AS opens
  FROM _idle_charges
  WINDOW w AS (PARTITION BY run_id, rank, device ORDER BY piece_start, piece_end)
),
merged AS (
  SELECT run_id, rank, device, gap_id, cause, step, site_id, frame, pid, tid, min(piece_start) AS piece_start,
         sum(ns)::BIGINT AS ns
  FROM (SELECT *, sum(opens) OVER (PARTITION BY run_id, rank, device ORDER BY piece_start, piece_end) AS stretch
        FROM opened)
  GROUP BY run_id, rank, device, stretch, gap_id, cause, step, site_id, frame, pid, tid
),
sites AS (  -- the calls charged (far fewer than the stretches) with the ops around them
  SELECT s.run_id, s.rank, s.event_id AS site_id, s.name AS call,
         CASE WHEN s.kind = 'runtime' THEN p.name ELSE s.name END AS op, t.name AS top_op
  FROM (SELECT DISTINCT run_id, rank, site_id FROM merged WHERE site_id IS NOT NULL) d
  JOIN events s ON s.run_id = d.run_id AND s.rank = d.rank AND s.event_id = d.site_id
  LEFT JOIN events p ON p.run_id = s.run_id AND p.rank = s.rank AND p.event_id = s.parent_id
  LEFT JOIN events t ON t.run_id = s.run_id AND t.rank = s.rank AND t.event_id = s.top_op_id
)
SELECT m.run_id, m.rank, m.device, m.piece_start, m.ns, m.cause, m.step,
       x.call, nullif(x.op, x.call) AS op, nullif(x.top_op, coalesce(x.op, x.call)) AS top_op, m.frame,
       m.pid::VARCHAR || '/' || m.tid::VARCHAR AS thread
FROM merged m
LEFT JOIN sites x ON x.run_id = m.run_id AND x.rank = m.rank AND x.site_id = m.site_id
