-- revision 1
-- release(name, holder_label, holder_instance, token): expire the lease now
-- when it is held by this holder with this token, keeping the row (and so
-- the token order), keep it for the head of the line for 250 ms
-- (store.Handoff), and announce it, naming that follower. Returns the
-- number of leases released (0 or 1).
CREATE OR REPLACE FUNCTION {{release_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    n             bigint;
    next_label    text := '';
    next_instance text := '';
BEGIN
    SELECT w.holder_label, w.holder_instance INTO next_label, next_instance
    FROM {{waiters}} AS w
    WHERE w.name = p_name AND w.until > clock_timestamp()
    ORDER BY w.ticket
    LIMIT 1;
    UPDATE {{leases}} AS l SET
        released      = true,
        expires_at    = clock_timestamp(),
        kept_label    = coalesce(next_label, ''),
        kept_instance = coalesce(next_instance, ''),
        kept_until    = CASE WHEN next_label IS NULL THEN NULL ELSE clock_timestamp() + interval '250 milliseconds' END
    WHERE l.name = p_name
      AND l.holder_label = p_holder_label
      AND l.holder_instance = p_holder_instance
      AND l.token = p_token
      AND NOT l.released
      AND l.expires_at > clock_timestamp();
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        DELETE FROM {{waiters}} AS w WHERE w.name = p_name AND w.until <= clock_timestamp();
        PERFORM pg_notify({{channel_lit}}, json_build_object('n', p_name, 'k', 'r', 'nl', coalesce(next_label, ''),
                                                             'ni', coalesce(next_instance, ''))::text);
    END IF;
    RETURN n;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{release_fn}}(text, text, text, bigint) FROM PUBLIC;
