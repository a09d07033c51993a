-- revision 1
-- check_lease_strict(name, token, holder_label, holder_instance, seq) is
-- check_lease that also requires the holder and the renewal seq to match,
-- and advances seq by one; it returns the new seq, which the holder must
-- renew with next. Of two byte-identical clones only one can pass: the
-- other raises SQLSTATE TF003 (or TF002 when the lease itself is no longer
-- held with token). It locks the lease row (FOR NO KEY UPDATE) until the
-- calling transaction ends, which holds off renewals and takeovers alike:
-- keep fenced transactions short next to the TTL. It runs as its owner.
CREATE OR REPLACE FUNCTION {{check_lease_strict_fn}}(name text, token bigint, holder_label text, holder_instance text, seq bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_name     ALIAS FOR $1;
    p_token    ALIAS FOR $2;
    p_label    ALIAS FOR $3;
    p_instance ALIAS FOR $4;
    p_seq      ALIAS FOR $5;
    cur        record;
    next_seq   bigint;
BEGIN
    IF p_name IS NULL OR p_token IS NULL OR p_label IS NULL OR p_instance IS NULL OR p_seq IS NULL THEN
        RAISE EXCEPTION 'tenure: check lease strict: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;

    SELECT l.token, l.released, l.expires_at, l.holder_label, l.holder_instance, l.seq INTO cur
    FROM {{leases}} AS l
    WHERE l.name = p_name
    FOR NO KEY UPDATE;

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
    ELSIF cur.holder_label <> p_label OR cur.holder_instance <> p_instance OR cur.seq <> p_seq THEN
        RAISE EXCEPTION 'tenure: fenced: lease % with token % moved to seq % (offered seq %); another holder with this identity got there first',
                quote_literal(p_name), p_token, cur.seq, p_seq
            USING ERRCODE = 'TF003',
                  DETAIL = format('current=%s offered=%s current_seq=%s offered_seq=%s', cur.token, p_token, cur.seq, p_seq),
                  HINT = 'this holder was cloned or lost a reply: roll back, stand down and acquire again';
    END IF;

    UPDATE {{leases}} AS l SET seq = l.seq + 1
    WHERE l.name = p_name
    RETURNING l.seq INTO next_seq;
    RETURN next_seq;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{check_lease_strict_fn}}(text, bigint, text, text, bigint) FROM PUBLIC;
