-- Acquire a batch in one statement and one round trip (migration 009),
-- answers in input order. A null acquired says to ask again for that lease
-- alone: its row was locked by another transaction, or it became free
-- while the batch ran.
-- $1 names, $2 holder labels, $3 holder instances, $4 TTLs in
-- microseconds, $5 payloads, $6 wait flags (arrays of equal length).
SELECT a.acquired, coalesce(a.holder_label, ''), coalesce(a.holder_instance, ''), coalesce(a.token, 0),
       coalesce(a.seq, 0), coalesce(a.remaining_us, 0), coalesce(a.payload, ''), clock_timestamp() AS at,
       coalesce(a.pos, 0), coalesce(a.next_label, ''), coalesce(a.next_instance, '')
FROM {{acquire_batch_fn}}($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::boolean[]) AS a
ORDER BY a.ord
