-- Place: record agent $2 as the owner of resource $1, only if the resource
-- has no owner and the agent is alive by the server's clock at this
-- instant. $3 metadata (json text or NULL). Returns a row only when it
-- inserted; the caller then reads the ownership again either way.
-- (see the function owner_place in migration 002)
SELECT * FROM {{owner_place_fn}}($1::text, $2::text, $3::text)
