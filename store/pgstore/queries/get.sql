-- Get one lease as it is by the server's clock. $1 name.
SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_at, l.released,
       NOT l.released AND l.expires_at > clock_timestamp() AS held,
       greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint AS remaining_us
FROM {{leases}} AS l
WHERE l.name = $1
