-- Every agent as it is by the server's clock, with the number of resources
-- it owns, ordered by id.
WITH now AS (SELECT clock_timestamp() AS t),
owned AS (
    SELECT o.agent_id, count(*) AS n FROM {{owners}} AS o GROUP BY o.agent_id
)
SELECT {{agent_columns}}, coalesce(owned.n, 0) AS owned
FROM {{agents}} AS a CROSS JOIN now
LEFT JOIN owned ON owned.agent_id = a.id
ORDER BY a.id COLLATE "C"
