-- Place: record agent $2 as the owner of resource $1, only if the resource
-- has no owner and the agent is alive by the server's clock at this
-- instant. $3 metadata (json text or NULL). Returns a row only when it
-- inserted; the caller then reads the ownership again either way.
INSERT INTO {{owners}} (resource, agent_id, created_at, updated_at, metadata)
SELECT $1, a.id, clock_timestamp(), clock_timestamp(), $3::text::jsonb
FROM {{agents}} AS a
WHERE a.id = $2
  AND NOT a.deregistered
  AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > clock_timestamp()
ON CONFLICT (resource) DO NOTHING
RETURNING resource
