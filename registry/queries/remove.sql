-- Remove the ownership of resource $1 from agent $2 (locked by
-- lock_owner.sql in the same transaction) and record why, as a history row
-- with an empty to_agent. $3 reason, $4 whether the agent was alive, $5 its
-- last heartbeat (NULL if unknown).
WITH del AS (
    DELETE FROM {{owners}} AS o
    WHERE o.resource = $1 AND o.agent_id = $2
    RETURNING o.resource
)
INSERT INTO {{reassignments}} (resource, from_agent, to_agent, reason, from_alive, from_last_heartbeat, reassigned_at)
SELECT $1, $2, '', $3, $4, $5, clock_timestamp()
FROM del
RETURNING id
