-- Renew a batch (see the renew function in migration 003): one statement,
-- one round trip, results in input order.
-- $1 names, $2 holder labels, $3 holder instances, $4 tokens, $5 seqs,
-- $6 TTLs in microseconds (arrays of equal length).
-- at: the server's clock once it decided (store.Grant.At).
SELECT r.renewed, r.known, r.holder_label, r.holder_instance, r.token, r.seq, r.held, r.remaining_us,
       clock_timestamp() AS at
FROM {{renew_fn}}($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) AS r
