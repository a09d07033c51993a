-- Release: expire the lease now when it is held by this holder with this
-- token, keeping the row, and announce it (see the release function in
-- migration 003). $1 name, $2 holder label, $3 holder instance, $4 token.
SELECT {{release_fn}}($1::text, $2::text, $3::text, $4::bigint)
