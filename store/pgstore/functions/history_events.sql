-- revision 1
-- history_events(name, since, limit): history_read with the events of the
-- windows (window-started, window-completed, window-failed) and their
-- window_key (null for the other events): the most recent limit events at
-- or after since (every event when null) of the lease name (of every lease
-- when null), oldest first. Read only; the read-only role may call it.
CREATE OR REPLACE FUNCTION {{history_events_fn}}(p_name text, p_since timestamptz, p_limit integer)
RETURNS TABLE (name text, kind text, holder_label text, holder_instance text, token bigint,
               previous_holder_label text, previous_holder_instance text, previous_token bigint,
               at timestamptz, window_key text)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'tenure: history: the limit must be between 1 and 10000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT r.name, r.kind, r.holder_label, r.holder_instance, r.token,
           r.previous_holder_label, r.previous_holder_instance, r.previous_token, r.at, r.window_key
    FROM (
        SELECT h.id, h.name, h.kind, h.holder_label, h.holder_instance, h.token,
               h.previous_holder_label, h.previous_holder_instance, h.previous_token, h.at, h.window_key
        FROM {{history}} AS h
        WHERE (p_name IS NULL OR h.name = p_name)
          AND (p_since IS NULL OR h.at >= p_since)
        ORDER BY h.at DESC, h.id DESC
        LIMIT p_limit
    ) AS r
    ORDER BY r.at, r.id;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{history_events_fn}}(text, timestamptz, integer) FROM PUBLIC;

-- A role granted history_read by an older library (Config.GrantSQL or
-- Config.ReadGrantSQL) needs no new GRANT: whoever may execute
-- history_read may execute this function too.
DO $grant$
DECLARE
    g record;
BEGIN
    -- to_regprocedure: nothing to carry over on a schema without it yet
    -- (a first Migrate installs the functions in name order).
    FOR g IN
        SELECT DISTINCT a.grantee
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.oid = pg_catalog.to_regprocedure({{history_read_fn_lit}} || '(text, timestamptz, integer)')
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I',
                       ({{history_events_fn_lit}} || '(text, timestamptz, integer)')::regprocedure,
                       pg_catalog.pg_get_userbyid(g.grantee));
    END LOOP;
END
$grant$;
