-- Acquire a batch: the acquire function once per lease, in one statement
-- and one round trip, answers in input order. A lease whose function call
-- returned no row (its row was inserted by a transaction the statement
-- cannot see) answers with a null acquired, and the caller asks again for
-- it alone.
-- $1 names, $2 holder labels, $3 holder instances, $4 TTLs in
-- microseconds, $5 payloads, $6 wait flags (arrays of equal length).
SELECT a.acquired, coalesce(a.holder_label, ''), coalesce(a.holder_instance, ''), coalesce(a.token, 0),
       coalesce(a.seq, 0), coalesce(a.remaining_us, 0), coalesce(a.payload, ''), clock_timestamp() AS at,
       coalesce(a.pos, 0), coalesce(a.next_label, ''), coalesce(a.next_instance, '')
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::boolean[]) WITH ORDINALITY
    AS u(name, holder_label, holder_instance, ttl_us, payload, wait, ord)
LEFT JOIN LATERAL {{acquire_fn}}(u.name, u.holder_label, u.holder_instance, u.ttl_us, u.payload, u.wait) AS a ON true
ORDER BY u.ord
