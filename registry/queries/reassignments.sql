-- The reassignments of resource $1, oldest first.
SELECT r.id, r.resource, r.from_agent, r.to_agent, r.reason, r.from_alive, r.from_last_heartbeat, r.reassigned_at
FROM {{reassignments}} AS r
WHERE r.resource = $1
ORDER BY r.id
