-- Acquire: take the lease when it is absent, released or expired by the
-- server's clock and not kept for another follower, else report who holds
-- it, and put a waiting caller in line (see the acquire function in
-- migration 007). One statement, one round trip.
-- $1 name, $2 holder label, $3 holder instance, $4 TTL in microseconds, $5 payload, $6 wait.
-- at: the server's clock once it decided (store.Grant.At).
SELECT a.acquired, a.holder_label, a.holder_instance, a.token, a.seq, a.remaining_us, a.payload, clock_timestamp() AS at,
       a.pos, a.next_label, a.next_instance
FROM {{acquire_fn}}($1::text, $2::text, $3::text, $4::bigint, $5::text, $6::boolean) AS a
