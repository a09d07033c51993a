-- Release: expire the lease now when it is held by this holder with this
-- token, keeping the row (and so the token order), and announce it.
-- $1 name, $2 holder label, $3 holder instance, $4 token, $5 channel.
WITH rel AS (
    UPDATE {{leases}} AS l SET
        released   = true,
        expires_at = clock_timestamp()
    WHERE l.name = $1
      AND l.holder_label = $2
      AND l.holder_instance = $3
      AND l.token = $4
      AND NOT l.released
      AND l.expires_at > clock_timestamp()
    RETURNING l.name
)
SELECT count(*) FROM rel CROSS JOIN LATERAL pg_notify($5, rel.name) AS n
