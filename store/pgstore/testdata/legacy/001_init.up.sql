-- tenure 001: leases, the token sequence, fences and the fence functions.
-- Every statement can run again without harm.

-- One row per lease name, never deleted: deleting a row would lose nothing
-- of the token order (the sequence keeps it), but it would lose who held
-- the lease last.
CREATE TABLE IF NOT EXISTS {{leases}} (
    name            text        PRIMARY KEY,
    holder_label    text        NOT NULL,
    holder_instance text        NOT NULL,
    token           bigint      NOT NULL CHECK (token > 0),
    seq             bigint      NOT NULL CHECK (seq > 0),
    acquired_at     timestamptz NOT NULL,
    renewed_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    released        boolean     NOT NULL DEFAULT false
);

-- Every new tenure draws its token here, so tokens only go up, across
-- releases, deleted rows and restarts.
CREATE SEQUENCE IF NOT EXISTS {{token_seq}} AS bigint MINVALUE 1 NO CYCLE;

-- The highest token each resource accepted.
CREATE TABLE IF NOT EXISTS {{fences}} (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

-- fence(resource, token) records token as the highest token resource has
-- accepted, or raises SQLSTATE TF001 when a greater one was recorded
-- before. An equal token passes. It locks the resource's fence row until
-- the calling transaction ends, so fenced writes to one resource commit in
-- token order; a rolled-back transaction leaves the fence as it was.
CREATE OR REPLACE FUNCTION {{fence_fn}}(resource text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $body$
#variable_conflict use_column
DECLARE
    p_resource ALIAS FOR $1;
    p_token    ALIAS FOR $2;
    recorded   bigint;
BEGIN
    IF p_resource IS NULL OR p_token IS NULL THEN
        RAISE EXCEPTION 'tenure: fence: resource and token must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_token <= 0 THEN
        RAISE EXCEPTION 'tenure: fence: token % for resource % must be positive', p_token, quote_literal(p_resource)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    INSERT INTO {{fences}} AS f (resource, token, updated_at)
    VALUES (p_resource, p_token, clock_timestamp())
    ON CONFLICT (resource) DO UPDATE
        SET token = excluded.token, updated_at = excluded.updated_at
        WHERE f.token <= excluded.token
    RETURNING f.token INTO recorded;

    IF NOT FOUND THEN
        -- The row is locked by the INSERT above; this reads its latest version.
        SELECT f.token INTO recorded FROM {{fences}} AS f WHERE f.resource = p_resource;
        RAISE EXCEPTION 'tenure: fenced: resource % already accepted token %; token % is stale (its holder was superseded)',
                quote_literal(p_resource), recorded, p_token
            USING ERRCODE = 'TF001',
                  DETAIL = format('recorded=%s offered=%s', recorded, p_token),
                  HINT = 'roll back and stop working under this token';
    END IF;
END
$body$;

-- check_lease(name, token) returns when lease name is held with token by
-- clock_timestamp() and raises SQLSTATE TF002 otherwise. It takes a FOR
-- SHARE lock on the lease row until the calling transaction ends: a
-- takeover (and the holder's own renewal) waits for that transaction, so a
-- write checked this way commits before any new holder exists.
CREATE OR REPLACE FUNCTION {{check_lease_fn}}(name text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
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

-- check_lease_strict(name, token, holder_label, holder_instance, seq) is
-- check_lease that also requires the holder and the renewal seq to match,
-- and advances seq by one; it returns the new seq, which the holder must
-- renew with next. Of two byte-identical clones only one can pass: the
-- other raises SQLSTATE TF003 (or TF002 when the lease itself is no longer
-- held with token). It locks the lease row (FOR NO KEY UPDATE) until the
-- calling transaction ends, which holds off renewals and takeovers alike:
-- keep fenced transactions short next to the TTL.
CREATE OR REPLACE FUNCTION {{check_lease_strict_fn}}(name text, token bigint, holder_label text, holder_instance text, seq bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
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
