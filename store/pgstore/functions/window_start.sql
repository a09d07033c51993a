-- revision 1
-- window_start(name, holder_label, holder_instance, token, key, period_ms,
-- retry): begin the window of store.Windower.StartWindow for the tenure
-- (holder, token), in one statement's transaction: the lease row is locked
-- FOR SHARE and found held by the server's clock (clock_timestamp(), read
-- after the lock), so no takeover commits in between; then the window row
-- is locked and decided on; a window begun is recorded in the history
-- (window-started, naming the tenure taken over from, if another). With key null the window is derived from
-- period_ms on the server's clock: '@' || start_ms || '+' || period_ms.
-- Returns one row: outcome ('begun', 'again', 'refused', 'fenced' or
-- 'not-held') and the window as recorded after the call (no window for
-- 'not-held').
CREATE OR REPLACE FUNCTION {{window_start_fn}}(p_name text, p_holder_label text, p_holder_instance text,
                                               p_token bigint, p_key text, p_period_ms bigint, p_retry boolean)
RETURNS TABLE (outcome text, window_key text, state text, holder_label text, holder_instance text,
               token bigint, attempts bigint, started_at timestamptz, finished_at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    now_ts timestamptz;
    now_ms bigint;
    k      text := p_key;
    w      record;
BEGIN
    PERFORM 1 FROM {{leases}} AS l
    WHERE l.name = p_name AND l.holder_label = p_holder_label AND l.holder_instance = p_holder_instance
      AND l.token = p_token
    FOR SHARE;
    now_ts := clock_timestamp();
    IF NOT FOUND OR NOT EXISTS (
        SELECT 1 FROM {{leases}} AS l
        WHERE l.name = p_name AND l.token = p_token AND NOT l.released AND l.expires_at > now_ts) THEN
        RETURN QUERY SELECT 'not-held'::text, k, NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz;
        RETURN;
    END IF;
    IF k IS NULL THEN
        now_ms := floor(extract(epoch FROM now_ts) * 1000)::bigint;
        k := '@' || (now_ms - now_ms % p_period_ms)::text || '+' || p_period_ms::text;
    END IF;

    SELECT * INTO w FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = k FOR UPDATE;
    IF FOUND THEN
        IF w.token > p_token THEN
            RETURN QUERY SELECT 'fenced'::text, k, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
                                w.started_at, w.finished_at;
            RETURN;
        ELSIF w.state = 'completed' THEN
            RETURN QUERY SELECT 'refused'::text, k, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
                                w.started_at, w.finished_at;
            RETURN;
        ELSIF w.state = 'started' AND w.token = p_token AND w.holder_label = p_holder_label
              AND w.holder_instance = p_holder_instance THEN
            RETURN QUERY SELECT 'again'::text, k, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
                                w.started_at, w.finished_at;
            RETURN;
        ELSIF NOT p_retry THEN
            RETURN QUERY SELECT 'refused'::text, k, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
                                w.started_at, w.finished_at;
            RETURN;
        END IF;
        UPDATE {{windows}} AS x SET state = 'started', holder_label = p_holder_label,
            holder_instance = p_holder_instance, token = p_token, attempts = x.attempts + 1,
            started_at = now_ts, finished_at = NULL
        WHERE x.name = p_name AND x.window_key = k;
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token,
                                 previous_holder_label, previous_holder_instance, previous_token, at, window_key)
        VALUES (p_name, 'window-started', p_holder_label, p_holder_instance, p_token,
                CASE WHEN w.token <> p_token THEN w.holder_label END,
                CASE WHEN w.token <> p_token THEN w.holder_instance END,
                CASE WHEN w.token <> p_token THEN w.token END, now_ts, k);
    ELSE
        -- A concurrent first start of this window by this same tenure
        -- (the lease lock keeps out every other) waits here and finds
        -- the row: it answers 'again'.
        INSERT INTO {{windows}} AS x (name, window_key, state, holder_label, holder_instance, token, attempts, started_at)
        VALUES (p_name, k, 'started', p_holder_label, p_holder_instance, p_token, 1, now_ts)
        ON CONFLICT (name, window_key) DO NOTHING;
        IF FOUND THEN
            INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at, window_key)
            VALUES (p_name, 'window-started', p_holder_label, p_holder_instance, p_token, now_ts, k);
        ELSE
            RETURN QUERY SELECT 'again'::text, x.window_key, x.state, x.holder_label, x.holder_instance, x.token,
                                x.attempts, x.started_at, x.finished_at
                FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = k;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT 'begun'::text, x.window_key, x.state, x.holder_label, x.holder_instance, x.token,
                        x.attempts, x.started_at, x.finished_at
        FROM {{windows}} AS x WHERE x.name = p_name AND x.window_key = k;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL names may call it.
REVOKE ALL ON FUNCTION {{window_start_fn}}(text, text, text, bigint, text, bigint, boolean) FROM PUBLIC;

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
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', ({{window_start_fn_lit}} || '(text, text, text, bigint, text, bigint, boolean)')::regprocedure,
                       pg_catalog.pg_get_userbyid(g.grantee));
    END LOOP;
END
$grant$;
