-- Release a batch: the release function once per tenure, in one statement
-- and one round trip, answers in input order (1 released, 0 refused).
-- $1 names, $2 holder labels, $3 holder instances, $4 tokens (arrays of
-- equal length).
SELECT {{release_fn}}(u.name, u.holder_label, u.holder_instance, u.token)
FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY
    AS u(name, holder_label, holder_instance, token, ord)
ORDER BY u.ord
