-- The reassignments of resource $1, oldest first.
-- (see the function owner_history in migration 002)
SELECT * FROM {{owner_history_fn}}($1::text)
