-- Move resource $1 to agent $2 (locked by lock_owner.sql in the same
-- transaction) and record why. $3 previous agent, $4 reason, $5 whether the
-- previous agent was alive, $6 its last heartbeat (NULL if unknown).
WITH upd AS (
    UPDATE {{owners}} AS o SET agent_id = $2, updated_at = clock_timestamp()
    WHERE o.resource = $1 AND o.agent_id = $3
    RETURNING o.resource
)
INSERT INTO {{reassignments}} (resource, from_agent, to_agent, reason, from_alive, from_last_heartbeat, reassigned_at)
SELECT $1, $3, $2, $4, $5, $6, clock_timestamp()
FROM upd
RETURNING id
