-- Get one lease as it is by the server's clock. $1 name.
SELECT g.name, g.holder_label, g.holder_instance, g.token, g.seq, g.acquired_at, g.released, g.held, g.remaining_us, g.payload
FROM {{get_lease_fn}}($1::text) AS g
