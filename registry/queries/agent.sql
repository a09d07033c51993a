-- One agent as it is by the server's clock. $1 id.
WITH now AS (SELECT clock_timestamp() AS t)
SELECT {{agent_columns}},
       (SELECT count(*) FROM {{owners}} AS o WHERE o.agent_id = a.id) AS owned
FROM {{agents}} AS a CROSS JOIN now
WHERE a.id = $1
