-- AcquireSlot: take the first free slot of a name (see
-- functions/acquire_slot.sql). One statement, one round trip.
-- $1 name, $2 slots, $3 holder label, $4 holder instance, $5 TTL in microseconds, $6 payload.
-- at: the server's clock once it decided (store.Grant.At).
SELECT a.slot, a.acquired, a.holder_label, a.holder_instance, a.token, a.seq, a.remaining_us, a.payload,
       clock_timestamp() AS at
FROM {{acquire_slot_fn}}($1::text, $2::integer, $3::text, $4::text, $5::bigint, $6::text) AS a
