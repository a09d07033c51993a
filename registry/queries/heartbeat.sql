-- Heartbeat: a compare-and-set on (id, instance, seq) that advances seq and
-- sets the heartbeat to the server's clock. A deregistered row never
-- matches. $1 id, $2 instance, $3 seq, $4 this heartbeat's nonce,
-- $5 the nonces of earlier heartbeats whose replies were lost (may be
-- empty).
--
-- The second arm recognises a lost reply: the row's last step was taken by
-- a heartbeat of this process, whose random nonce only this process knows.
-- A clone that advanced the chain itself left its own nonce, so it is still
-- told apart.
--
-- SET expressions read the row before the update: last_gap_us is the time
-- since the previous heartbeat.
UPDATE {{agents}} AS a SET
    seq          = a.seq + 1,
    beat_nonce   = $4,
    last_gap_us  = greatest(0, floor(extract(epoch FROM clock_timestamp() - a.heartbeat_at) * 1000000))::bigint,
    heartbeat_at = clock_timestamp()
WHERE a.id = $1
  AND a.instance = $2
  AND NOT a.deregistered
  AND (a.seq = $3 OR a.beat_nonce = ANY ($5::text[]))
RETURNING a.seq, a.heartbeat_at, a.last_gap_us, a.stale_after_us, a.conflicts,
          a.last_conflict_at, coalesce(a.last_conflict_instance, '')
