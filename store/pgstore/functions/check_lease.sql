-- revision 1
-- check_lease(name, token) returns when lease name is held with token by
-- the server's clock (clock_timestamp(), read after the row lock was
-- granted), and raises SQLSTATE TF002 otherwise. It takes a FOR
-- SHARE lock on the lease row until the calling transaction ends: a
-- takeover (and the holder's own renewal) waits for that transaction, so a
-- write checked this way commits before any new holder exists. It runs as
-- its owner.
CREATE OR REPLACE FUNCTION {{check_lease_fn}}(name text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_name  ALIAS FOR $1;
    p_token ALIAS FOR $2;
    cur     record;
BEGIN
    IF p_name IS NULL OR p_token IS NULL THEN
        RAISE EXCEPTION 'tenure: check lease: name and token must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT l.token, l.released, l.expires_at INTO cur
    FROM {{leases}} AS l
    WHERE l.name = p_name
    FOR SHARE;

    -- Judge expiry after the lock is granted, by the clock of now.
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenure: fenced: lease % does not exist; token % is not valid', quote_literal(p_name), p_token
            USING ERRCODE = 'TF002',
                  DETAIL = format('current=0 offered=%s state=absent', p_token);
    ELSIF cur.token <> p_token THEN
        RAISE EXCEPTION 'tenure: fenced: lease % is now at token %; token % is stale (its holder was superseded)',
                quote_literal(p_name), cur.token, p_token
            USING ERRCODE = 'TF002',
                  DETAIL = format('current=%s offered=%s state=superseded', cur.token, p_token);
    ELSIF cur.released THEN
        RAISE EXCEPTION 'tenure: fenced: lease % with token % was released', quote_literal(p_name), p_token
            USING ERRCODE = 'TF002',
                  DETAIL = format('current=%s offered=%s state=released', cur.token, p_token);
    ELSIF cur.expires_at <= clock_timestamp() THEN
        RAISE EXCEPTION 'tenure: fenced: lease % with token % expired', quote_literal(p_name), p_token
            USING ERRCODE = 'TF002',
                  DETAIL = format('current=%s offered=%s state=expired', cur.token, p_token);
    END IF;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{check_lease_fn}}(text, bigint) FROM PUBLIC;
