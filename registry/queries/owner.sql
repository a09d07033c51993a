-- The ownership of one resource and its agent as it is by the server's
-- clock. $1 resource.
--
-- A LEFT JOIN, never a filter on liveness: an ownership whose agent is
-- stale, deregistered or even missing is still returned, so it can never
-- read as "no owner" (the seed's first bug).
-- (see the function owner_get in migration 002)
SELECT * FROM {{owner_get_fn}}($1::text)
