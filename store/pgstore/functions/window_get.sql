-- revision 1
-- window_get(name, key): the window as recorded; no row when there is
-- none. Read only; the read-only role may call it.
CREATE OR REPLACE FUNCTION {{window_get_fn}}(p_name text, p_key text)
RETURNS TABLE (state text, holder_label text, holder_instance text, token bigint, attempts bigint,
               started_at timestamptz, finished_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT x.state, x.holder_label, x.holder_instance, x.token, x.attempts, x.started_at, x.finished_at
    FROM {{windows}} AS x
    WHERE x.name = p_name AND x.window_key = p_key;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{window_get_fn}}(text, text) FROM PUBLIC;

-- A role granted the lease protocol by an older library (Config.GrantSQL
-- before the windows) needs no new GRANT: whoever may execute get_lease
-- may execute this function too, as Config.GrantSQL now grants them together.
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
        WHERE p.oid = pg_catalog.to_regprocedure({{get_lease_fn_lit}} || '(text)')
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', ({{window_get_fn_lit}} || '(text, text)')::regprocedure,
                       pg_catalog.pg_get_userbyid(g.grantee));
    END LOOP;
END
$grant$;
