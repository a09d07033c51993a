-- Register: insert the agent, or take its row over when the row's agent is
-- deregistered or stale by the server's clock, or is this very instance (a
-- retry); when another instance is alive under this id, change nothing and
-- report it. One statement.
-- $1 id, $2 instance, $3 nonce, $4 address, $5 labels (json text),
-- $6 capacity (json text or NULL), $7 heartbeat interval and $8 stale
-- after, in microseconds.
--
-- ON CONFLICT locks the existing row and judges its WHERE on the latest
-- committed version, so two racing registrations cannot both win. A
-- takeover continues the row's seq, so the chain of an id never restarts.
WITH ins AS (
    INSERT INTO {{agents}} AS a
        (id, instance, seq, beat_nonce, address, labels, capacity, heartbeat_interval_us, stale_after_us,
         registered_at, heartbeat_at, last_gap_us, deregistered)
    VALUES ($1, $2, 1, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, $8,
            clock_timestamp(), clock_timestamp(), 0, false)
    ON CONFLICT (id) DO UPDATE SET
        instance              = excluded.instance,
        seq                   = a.seq + 1,
        beat_nonce            = excluded.beat_nonce,
        address               = excluded.address,
        labels                = excluded.labels,
        capacity              = excluded.capacity,
        heartbeat_interval_us = excluded.heartbeat_interval_us,
        stale_after_us        = excluded.stale_after_us,
        registered_at         = clock_timestamp(),
        heartbeat_at          = clock_timestamp(),
        last_gap_us           = 0,
        deregistered          = false
    WHERE a.deregistered
       OR a.instance = excluded.instance
       OR a.heartbeat_at + a.stale_after_us * interval '1 microsecond' <= clock_timestamp()
    RETURNING a.instance, a.seq, a.registered_at, a.heartbeat_at, a.stale_after_us, a.conflicts
),
-- When the INSERT did not register, the row it conflicted with is locked by
-- this statement; FOR SHARE reads its latest version. A row inserted by a
-- transaction that committed after this statement began is invisible here:
-- the statement then returns no row and the caller asks again.
cur AS (
    SELECT c.instance, c.seq, c.registered_at, c.heartbeat_at, c.stale_after_us, c.conflicts
    FROM {{agents}} AS c
    WHERE c.id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
    FOR SHARE
)
SELECT true AS registered, ins.instance, ins.seq, ins.registered_at, ins.heartbeat_at,
       0::bigint AS age_us, ins.stale_after_us, ins.conflicts
FROM ins
UNION ALL
SELECT false, cur.instance, cur.seq, cur.registered_at, cur.heartbeat_at,
       greatest(0, floor(extract(epoch FROM clock_timestamp() - cur.heartbeat_at) * 1000000))::bigint,
       cur.stale_after_us, cur.conflicts
FROM cur
