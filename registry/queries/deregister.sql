-- Deregister: a compare-and-set on (id, instance, seq) that marks the agent
-- as gone (it is then dead to every reader at once) and advances seq. The
-- row stays: ownerships keep naming it. $1 id, $2 instance, $3 seq,
-- $4 the nonces of earlier heartbeats whose replies were lost (see
-- heartbeat.sql).
UPDATE {{agents}} AS a SET
    seq          = a.seq + 1,
    beat_nonce   = '',
    deregistered = true
WHERE a.id = $1
  AND a.instance = $2
  AND NOT a.deregistered
  AND (a.seq = $3 OR a.beat_nonce = ANY ($4::text[]))
RETURNING a.seq
