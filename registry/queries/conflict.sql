-- Record a refused heartbeat or deregistration on the agent's row and
-- report the row as it is. Runs only after heartbeat.sql or deregister.sql
-- matched nothing; the WHERE keeps it from counting a row that matches
-- after all. $1 id, $2 instance, $3 seq.
UPDATE {{agents}} AS a SET
    conflicts              = a.conflicts + 1,
    last_conflict_at       = clock_timestamp(),
    last_conflict_instance = $2
WHERE a.id = $1
  AND NOT (a.instance = $2 AND a.seq = $3 AND NOT a.deregistered)
RETURNING a.instance, a.seq, a.deregistered, a.heartbeat_at
