-- Release, recorded as an operator's (see the force_release function in
-- migration 005). $1 name, $2 holder label, $3 holder instance, $4 token.
SELECT {{force_release_fn}}($1::text, $2::text, $3::text, $4::bigint)
