-- Lock one ownership row for a reassignment and report its agent as it is
-- by the server's clock. $1 resource.
WITH now AS (SELECT clock_timestamp() AS t)
SELECT o.agent_id,
       coalesce(NOT a.deregistered AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > now.t, false) AS alive,
       a.heartbeat_at
FROM {{owners}} AS o CROSS JOIN now
LEFT JOIN {{agents}} AS a ON a.id = o.agent_id
WHERE o.resource = $1
FOR UPDATE OF o
