-- revision 1
-- window_finish(name, key, holder_label, holder_instance, token, outcome):
-- record outcome ('completed' or 'failed') of a window begun by the tenure
-- (holder, token) when that tenure still holds the lease by the server's
-- clock (the lease row locked FOR SHARE, as window_start does), and
-- records it in the history (window-completed or window-failed). Returns
-- one row: ok (false: refused, nothing changed) and the window as
-- recorded after the call (nulls when there is none).
CREATE OR REPLACE FUNCTION {{window_finish_fn}}(p_name text, p_key text, p_holder_label text,
                                                p_holder_instance text, p_token bigint, p_outcome text)
RETURNS TABLE (ok boolean, state text, holder_label text, holder_instance text, token bigint, attempts bigint,
               started_at timestamptz, finished_at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    held boolean;
    w    record;
BEGIN
    IF p_outcome IS NULL OR p_outcome NOT IN ('completed', 'failed') THEN
        RAISE EXCEPTION 'tenure: finish window: the outcome must be completed or failed, not %', p_outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM {{leases}} AS l
    WHERE l.name = p_name AND l.holder_label = p_holder_label AND l.holder_instance = p_holder_instance
      AND l.token = p_token
    FOR SHARE;
    held := FOUND AND EXISTS (
        SELECT 1 FROM {{leases}} AS l
        WHERE l.name = p_name AND l.token = p_token AND NOT l.released AND l.expires_at > clock_timestamp());
    SELECT * INTO w FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz;
        RETURN;
    END IF;
    IF NOT held OR w.token <> p_token OR w.holder_label <> p_holder_label OR w.holder_instance <> p_holder_instance
       OR (w.state <> 'started' AND w.state <> p_outcome) THEN
        RETURN QUERY SELECT false, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
                            w.started_at, w.finished_at;
        RETURN;
    END IF;
    IF w.state = 'started' THEN
        UPDATE {{windows}} AS x SET state = p_outcome, finished_at = clock_timestamp()
        WHERE x.name = p_name AND x.window_key = p_key;
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at, window_key)
        SELECT p_name, 'window-' || p_outcome, p_holder_label, p_holder_instance, p_token, x.finished_at, p_key
        FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = p_key;
    END IF;
    RETURN QUERY SELECT true, x.state, x.holder_label, x.holder_instance, x.token, x.attempts, x.started_at, x.finished_at
        FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = p_key;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL names may call it.
REVOKE ALL ON FUNCTION {{window_finish_fn}}(text, text, text, text, bigint, text) FROM PUBLIC;

-- A role granted the lease protocol by an older library (Config.GrantSQL
-- before the windows) needs no new GRANT: whoever may execute release
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
        WHERE p.oid = pg_catalog.to_regprocedure({{release_fn_lit}} || '(text, text, text, bigint)')
          AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner AND a.grantee <> 0
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', ({{window_finish_fn_lit}} || '(text, text, text, text, bigint, text)')::regprocedure,
                       pg_catalog.pg_get_userbyid(g.grantee));
    END LOOP;
END
$grant$;
