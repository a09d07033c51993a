-- The ownership of one resource and its agent as it is by the server's
-- clock. $1 resource.
--
-- A LEFT JOIN, never a filter on liveness: an ownership whose agent is
-- stale, deregistered or even missing is still returned, so it can never
-- read as "no owner" (the seed's first bug).
WITH now AS (SELECT clock_timestamp() AS t)
SELECT o.resource, o.agent_id, o.created_at, o.updated_at, o.metadata::text,
       {{agent_columns}}, 0::bigint AS owned
FROM {{owners}} AS o CROSS JOIN now
LEFT JOIN {{agents}} AS a ON a.id = o.agent_id
WHERE o.resource = $1
