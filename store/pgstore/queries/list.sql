-- List every lease as it is by the server's clock, in byte order of name.
SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_at, l.released, l.held, l.remaining_us, l.payload
FROM {{list_leases_fn}}() AS l
