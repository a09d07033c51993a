-- Deregister: a compare-and-set on (id, instance, seq) that marks the agent
-- as gone (it is then dead to every reader at once) and advances seq. The
-- row stays: ownerships keep naming it. $1 id, $2 instance, $3 seq,
-- $4 the nonces of earlier heartbeats whose replies were lost (see
-- heartbeat.sql).
-- (see the function agent_deregister in migration 002)
SELECT * FROM {{agent_deregister_fn}}($1::text, $2::text, $3::bigint, $4::text[])
