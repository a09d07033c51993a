-- Renew a batch: a compare-and-set on (holder, token, seq) per lease, still
-- held by the server's clock; each renewed lease gets seq + 1 and a new
-- expiry. One statement, one round trip, results in input order. Entries
-- that did not renew report the lease as it is now (its latest committed
-- version, read FOR SHARE).
-- $1 names, $2 holder labels, $3 holder instances, $4 tokens, $5 seqs,
-- $6 TTLs in microseconds (arrays of equal length).
WITH input AS (
    SELECT *
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
        WITH ORDINALITY AS i(name, holder_label, holder_instance, token, seq, ttl_us, ord)
),
upd AS (
    UPDATE {{leases}} AS l SET
        seq        = l.seq + 1,
        renewed_at = clock_timestamp(),
        expires_at = clock_timestamp() + i.ttl_us * interval '1 microsecond'
    FROM input AS i
    WHERE l.name = i.name
      AND l.holder_label = i.holder_label
      AND l.holder_instance = i.holder_instance
      AND l.token = i.token
      AND l.seq = i.seq
      AND NOT l.released
      AND l.expires_at > clock_timestamp()
    RETURNING l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at
)
SELECT u.name IS NOT NULL AS renewed,
       c.name IS NOT NULL OR u.name IS NOT NULL AS known,
       coalesce(u.holder_label, c.holder_label, '') AS holder_label,
       coalesce(u.holder_instance, c.holder_instance, '') AS holder_instance,
       coalesce(u.token, c.token, 0) AS token,
       coalesce(u.seq, c.seq, 0) AS seq,
       u.name IS NOT NULL OR coalesce(NOT c.released AND c.expires_at > clock_timestamp(), false) AS held,
       greatest(0, floor(extract(epoch FROM coalesce(u.expires_at, c.expires_at) - clock_timestamp()) * 1000000))::bigint AS remaining_us
FROM input AS i
LEFT JOIN upd AS u ON u.name = i.name
LEFT JOIN LATERAL (
    SELECT x.name, x.holder_label, x.holder_instance, x.token, x.seq, x.expires_at, x.released
    FROM {{leases}} AS x
    WHERE x.name = i.name AND u.name IS NULL
    FOR SHARE
) AS c ON true
ORDER BY i.ord
