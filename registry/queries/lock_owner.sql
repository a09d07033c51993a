-- Lock one ownership row for a reassignment and report its agent as it is
-- by the server's clock. $1 resource.
-- (see the function owner_lock in migration 002)
SELECT * FROM {{owner_lock_fn}}($1::text)
