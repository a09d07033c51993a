-- revision 1
-- renew(names, holder_labels, holder_instances, tokens, seqs, ttls_us): a
-- compare-and-set on (holder, token, seq) per lease, still held by the
-- server's clock; each renewed lease gets seq + 1 and a new expiry. One
-- statement for the whole batch, results in input order. Entries that did
-- not renew report the lease as it is now (its latest committed version,
-- read FOR SHARE). Its statement runs on a generic plan: with a custom
-- plan (what PostgreSQL keeps choosing for arrays of unknown length) it is
-- planned again on every call, which costs more than the renewal.
CREATE OR REPLACE FUNCTION {{renew_fn}}(p_names text[], p_holder_labels text[], p_holder_instances text[],
                                        p_tokens bigint[], p_seqs bigint[], p_ttls_us bigint[])
RETURNS TABLE (renewed boolean, known boolean, holder_label text, holder_instance text, token bigint, seq bigint,
               held boolean, remaining_us bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $body$
#variable_conflict use_column
BEGIN
    IF p_names IS NULL OR p_holder_labels IS NULL OR p_holder_instances IS NULL
       OR p_tokens IS NULL OR p_seqs IS NULL OR p_ttls_us IS NULL THEN
        RAISE EXCEPTION 'tenure: renew: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(p_holder_labels) <> cardinality(p_names) OR cardinality(p_holder_instances) <> cardinality(p_names)
       OR cardinality(p_tokens) <> cardinality(p_names) OR cardinality(p_seqs) <> cardinality(p_names)
       OR cardinality(p_ttls_us) <> cardinality(p_names) THEN
        RAISE EXCEPTION 'tenure: renew: the argument arrays must have equal lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH input AS (
        SELECT *
        FROM unnest(p_names, p_holder_labels, p_holder_instances, p_tokens, p_seqs, p_ttls_us)
            WITH ORDINALITY AS i(name, holder_label, holder_instance, token, seq, ttl_us, ord)
    ),
    upd AS (
        UPDATE {{leases}} AS l SET
            seq        = l.seq + 1,
            renewed_at = clock_timestamp(),
            expires_at = clock_timestamp() + i.ttl_us * interval '1 microsecond'
        FROM input AS i
        WHERE l.name = i.name
          AND l.holder_label = i.holder_label
          AND l.holder_instance = i.holder_instance
          AND l.token = i.token
          AND l.seq = i.seq
          AND i.ttl_us > 0
          AND NOT l.released
          AND l.expires_at > clock_timestamp()
        RETURNING l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at
    )
    SELECT u.name IS NOT NULL,
           c.name IS NOT NULL OR u.name IS NOT NULL,
           coalesce(u.holder_label, c.holder_label, ''),
           coalesce(u.holder_instance, c.holder_instance, ''),
           coalesce(u.token, c.token, 0),
           coalesce(u.seq, c.seq, 0),
           u.name IS NOT NULL OR coalesce(NOT c.released AND c.expires_at > clock_timestamp(), false),
           greatest(0, floor(extract(epoch FROM coalesce(u.expires_at, c.expires_at) - clock_timestamp()) * 1000000))::bigint
    FROM input AS i
    LEFT JOIN upd AS u ON u.name = i.name
    LEFT JOIN LATERAL (
        SELECT x.name, x.holder_label, x.holder_instance, x.token, x.seq, x.expires_at, x.released
        FROM {{leases}} AS x
        WHERE x.name = i.name AND u.name IS NULL
        FOR SHARE
    ) AS c ON true
    ORDER BY i.ord;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{renew_fn}}(text[], text[], text[], bigint[], bigint[], bigint[]) FROM PUBLIC;
