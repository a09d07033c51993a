-- Acquire: take the lease when it is absent, released or expired by the
-- server's clock, else report who holds it. One statement, one round trip.
-- $1 name, $2 holder label, $3 holder instance, $4 TTL in microseconds,
-- $5 token sequence (regclass text), $6 notification channel.
--
-- ON CONFLICT locks the existing row first and only then judges its WHERE
-- on the latest committed version, so two racing acquirers cannot both
-- win. A takeover draws its token in SET, after the lock: it is greater
-- than every token handed out before it for this name. (The nextval in
-- VALUES is evaluated on conflict too; the values it burns are harmless.)
WITH ins AS (
    INSERT INTO {{leases}} AS l
        (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at, released)
    VALUES ($1, $2, $3, nextval($5::text::regclass), 1, clock_timestamp(), clock_timestamp(),
            clock_timestamp() + $4::bigint * interval '1 microsecond', false)
    ON CONFLICT (name) DO UPDATE SET
        holder_label    = excluded.holder_label,
        holder_instance = excluded.holder_instance,
        token           = nextval($5::text::regclass),
        seq             = 1,
        acquired_at     = clock_timestamp(),
        renewed_at      = clock_timestamp(),
        expires_at      = clock_timestamp() + $4::bigint * interval '1 microsecond',
        released        = false
    WHERE l.released OR l.expires_at <= clock_timestamp()
    RETURNING l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at
),
-- When the INSERT did not take the lease, the row it conflicted with is
-- locked by this statement; FOR SHARE reads its latest version. A row
-- inserted by a transaction that committed after this statement began is
-- invisible here: the statement then returns no row and the caller asks
-- again.
cur AS (
    SELECT c.holder_label, c.holder_instance, c.token, c.seq, c.expires_at
    FROM {{leases}} AS c
    WHERE c.name = $1 AND NOT EXISTS (SELECT 1 FROM ins)
    FOR SHARE
)
SELECT true AS acquired, ins.holder_label, ins.holder_instance, ins.token, ins.seq,
       greatest(0, floor(extract(epoch FROM ins.expires_at - clock_timestamp()) * 1000000))::bigint AS remaining_us
FROM ins CROSS JOIN LATERAL pg_notify($6, ins.name) AS n
UNION ALL
SELECT false, cur.holder_label, cur.holder_instance, cur.token, cur.seq,
       greatest(0, floor(extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000))::bigint
FROM cur
