-- Record a refused heartbeat or deregistration on the agent's row and
-- report the row as it is. Runs only after heartbeat.sql or deregister.sql
-- matched nothing; the WHERE keeps it from counting a row that matches
-- after all. $1 id, $2 instance, $3 seq.
-- (see the function agent_conflict in migration 002)
SELECT * FROM {{agent_conflict_fn}}($1::text, $2::text, $3::bigint)
