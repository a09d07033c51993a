-- One agent as it is by the server's clock. $1 id.
-- (see the function agent_get in migration 002)
SELECT * FROM {{agent_get_fn}}($1::text)
