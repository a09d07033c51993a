-- tenure 003: the functions are the only interface of the run-time role.
--
-- Acquire, renew, release, get and list become functions, and they and the
-- fence functions run as their owner (SECURITY DEFINER) with a fixed
-- search_path: a run-time role granted EXECUTE on them (Config.GrantSQL)
-- needs no privilege on the tables or the sequence, so it cannot rewind a
-- fence, forge a lease or set the sequence. A fence accepts only tokens the
-- token sequence issued. fence_reset, the operator's repair of a poisoned
-- fence, runs as its caller and records every reset in fence_resets.
--
-- Every object name in a body is schema-qualified and search_path is
-- pg_catalog, pg_temp (pg_temp last), so nothing a caller creates can stand
-- in for a table or a built-in. Every statement can run again without harm.

-- One row per operator reset of a fence: who, when (the server's clock),
-- why, and the fence before and after.
CREATE TABLE IF NOT EXISTS {{fence_resets}} (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource     text        NOT NULL,
    old_token    bigint      NOT NULL,
    new_token    bigint      NOT NULL,
    reason       text        NOT NULL CHECK (reason <> ''),
    reset_by     text        NOT NULL,
    session_role text        NOT NULL,
    reset_at     timestamptz NOT NULL
);

-- acquire(name, holder_label, holder_instance, ttl_us): take the lease when
-- it is absent, released or expired by the server's clock, else report who
-- holds it. One statement.
--
-- ON CONFLICT locks the existing row first and only then judges its WHERE
-- on the latest committed version, so two racing acquirers cannot both
-- win. A takeover draws its token in SET, after the lock: it is greater
-- than every token handed out before it for this name. (The nextval in
-- VALUES is evaluated on conflict too; the values it burns are harmless.)
-- When the INSERT did not take the lease, the row it conflicted with is
-- locked by the statement and cur reads its latest version. A row inserted
-- by a transaction that committed after the statement began is invisible
-- to it: the function then returns no row and the caller asks again.
CREATE OR REPLACE FUNCTION {{acquire_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_ttl_us bigint)
RETURNS TABLE (acquired boolean, holder_label text, holder_instance text, token bigint, seq bigint, remaining_us bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    IF p_name IS NULL OR p_holder_label IS NULL OR p_holder_instance IS NULL OR p_ttl_us IS NULL THEN
        RAISE EXCEPTION 'tenure: acquire: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_name = '' OR p_holder_label = '' OR p_holder_instance = '' OR p_ttl_us <= 0 THEN
        RAISE EXCEPTION 'tenure: acquire: name and holder must not be empty and the TTL must be positive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH ins AS (
        INSERT INTO {{leases}} AS l
            (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at, released)
        VALUES (p_name, p_holder_label, p_holder_instance, nextval({{token_seq_lit}}::regclass), 1,
                clock_timestamp(), clock_timestamp(), clock_timestamp() + p_ttl_us * interval '1 microsecond', false)
        ON CONFLICT (name) DO UPDATE SET
            holder_label    = excluded.holder_label,
            holder_instance = excluded.holder_instance,
            token           = nextval({{token_seq_lit}}::regclass),
            seq             = 1,
            acquired_at     = clock_timestamp(),
            renewed_at      = clock_timestamp(),
            expires_at      = clock_timestamp() + p_ttl_us * interval '1 microsecond',
            released        = false
        WHERE l.released OR l.expires_at <= clock_timestamp()
        RETURNING l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at
    ),
    cur AS (
        SELECT c.holder_label, c.holder_instance, c.token, c.seq, c.expires_at
        FROM {{leases}} AS c
        WHERE c.name = p_name AND NOT EXISTS (SELECT 1 FROM ins)
        FOR SHARE
    )
    SELECT true, ins.holder_label, ins.holder_instance, ins.token, ins.seq,
           greatest(0, floor(extract(epoch FROM ins.expires_at - clock_timestamp()) * 1000000))::bigint
    FROM ins CROSS JOIN LATERAL pg_notify({{channel_lit}}, ins.name) AS n
    UNION ALL
    SELECT false, cur.holder_label, cur.holder_instance, cur.token, cur.seq,
           greatest(0, floor(extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000))::bigint
    FROM cur;
END
$body$;

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

-- release(name, holder_label, holder_instance, token): expire the lease now
-- when it is held by this holder with this token, keeping the row (and so
-- the token order), and announce it. Returns the number of leases released
-- (0 or 1).
CREATE OR REPLACE FUNCTION {{release_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    n bigint;
BEGIN
    WITH rel AS (
        UPDATE {{leases}} AS l SET
            released   = true,
            expires_at = clock_timestamp()
        WHERE l.name = p_name
          AND l.holder_label = p_holder_label
          AND l.holder_instance = p_holder_instance
          AND l.token = p_token
          AND NOT l.released
          AND l.expires_at > clock_timestamp()
        RETURNING l.name
    )
    SELECT count(*) INTO n FROM rel CROSS JOIN LATERAL pg_notify({{channel_lit}}, rel.name) AS x;
    RETURN n;
END
$body$;

-- get(name) and list(): leases as they are by the server's clock; list in
-- byte order of name. Read only.
CREATE OR REPLACE FUNCTION {{get_fn}}(p_name text)
RETURNS TABLE (name text, holder_label text, holder_instance text, token bigint, seq bigint,
               acquired_at timestamptz, released boolean, held boolean, remaining_us bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_at, l.released,
           NOT l.released AND l.expires_at > clock_timestamp(),
           greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint
    FROM {{leases}} AS l
    WHERE l.name = p_name;
END
$body$;

CREATE OR REPLACE FUNCTION {{list_fn}}()
RETURNS TABLE (name text, holder_label text, holder_instance text, token bigint, seq bigint,
               acquired_at timestamptz, released boolean, held boolean, remaining_us bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.acquired_at, l.released,
           NOT l.released AND l.expires_at > clock_timestamp(),
           greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint
    FROM {{leases}} AS l
    ORDER BY l.name COLLATE "C";
END
$body$;

-- fence(resource, token) records token as the highest token resource has
-- accepted, or raises SQLSTATE TF001 when a greater one was recorded
-- before. An equal token passes. A token the token sequence never issued
-- (greater than its last value) raises SQLSTATE TF004 and changes nothing.
-- It locks the resource's fence row until the calling transaction ends, so
-- fenced writes to one resource commit in token order; a rolled-back
-- transaction leaves the fence as it was.
CREATE OR REPLACE FUNCTION {{fence_fn}}(resource text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_resource ALIAS FOR $1;
    p_token    ALIAS FOR $2;
    issued     bigint;
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

    SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END INTO issued FROM {{token_seq}} AS s;
    IF p_token > issued THEN
        RAISE EXCEPTION 'tenure: fence: token % for resource % was never issued (the highest token issued is %); refused',
                p_token, quote_literal(p_resource), issued
            USING ERRCODE = 'TF004',
                  DETAIL = format('issued=%s offered=%s', issued, p_token),
                  HINT = 'a fence accepts only tokens its lease store handed out; fence tokens of another store with fence_foreign';
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

-- fence_foreign(resource, token) is fence for tokens of another lease store
-- (etcd, Consul, Redis), which this database cannot check: it takes any
-- positive token. Config.GrantSQL does not grant it: a role that may call it
-- can raise any fence of this prefix to any value.
CREATE OR REPLACE FUNCTION {{fence_foreign_fn}}(resource text, token bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
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
        SELECT f.token INTO recorded FROM {{fences}} AS f WHERE f.resource = p_resource;
        RAISE EXCEPTION 'tenure: fenced: resource % already accepted token %; token % is stale (its holder was superseded)',
                quote_literal(p_resource), recorded, p_token
            USING ERRCODE = 'TF001',
                  DETAIL = format('recorded=%s offered=%s', recorded, p_token),
                  HINT = 'roll back and stop working under this token';
    END IF;
END
$body$;

-- check_lease and check_lease_strict as in 001, now run as their owner.
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

-- fence_reset(resource, to_token, reason): the operator's repair of a
-- poisoned fence. It sets the fence of resource to to_token (0 up to the
-- last token issued), records the reset in fence_resets and returns the
-- token it replaced. It runs as its caller (SECURITY INVOKER): only a role
-- that may write fences and fence_resets itself (the owner) can use it, and
-- reset_by names that role. A resource without a fence raises TF005.
CREATE OR REPLACE FUNCTION {{fence_reset_fn}}(resource text, to_token bigint, reason text)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    p_resource ALIAS FOR $1;
    p_to       ALIAS FOR $2;
    p_reason   ALIAS FOR $3;
    issued     bigint;
    previous   bigint;
BEGIN
    IF p_resource IS NULL OR p_to IS NULL OR p_reason IS NULL THEN
        RAISE EXCEPTION 'tenure: fence reset: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_reason = '' THEN
        RAISE EXCEPTION 'tenure: fence reset: a reason is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END INTO issued FROM {{token_seq}} AS s;
    IF p_to < 0 OR p_to > issued THEN
        RAISE EXCEPTION 'tenure: fence reset: token % for resource % is outside 0..% (the tokens issued so far)',
                p_to, quote_literal(p_resource), issued
            USING ERRCODE = 'TF004',
                  DETAIL = format('issued=%s offered=%s', issued, p_to);
    END IF;

    SELECT f.token INTO previous FROM {{fences}} AS f WHERE f.resource = p_resource FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'tenure: fence reset: resource % has no fence; nothing to reset', quote_literal(p_resource)
            USING ERRCODE = 'TF005';
    END IF;
    UPDATE {{fences}} AS f SET token = p_to, updated_at = clock_timestamp() WHERE f.resource = p_resource;
    INSERT INTO {{fence_resets}} (resource, old_token, new_token, reason, reset_by, session_role, reset_at)
    VALUES (p_resource, previous, p_to, p_reason, current_user, session_user, clock_timestamp());
    RETURN previous;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call these.
REVOKE ALL ON FUNCTION {{acquire_fn}}(text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{renew_fn}}(text[], text[], text[], bigint[], bigint[], bigint[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{release_fn}}(text, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{get_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{list_fn}}() FROM PUBLIC;
REVOKE ALL ON FUNCTION {{fence_fn}}(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{fence_foreign_fn}}(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{check_lease_fn}}(text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{check_lease_strict_fn}}(text, bigint, text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{fence_reset_fn}}(text, bigint, text) FROM PUBLIC;

-- Upgrade in place: before 003 the run-time role wrote the tables and drew
-- from the sequence itself. Take every privilege that can change them from
-- every role but their owner; read privileges stay. A run-time role then
-- needs what Config.GrantSQL prints now (EXECUTE on the functions).
DO $revoke$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT DISTINCT c.oid::regclass::text AS rel, c.relkind,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS who
        FROM pg_catalog.pg_class AS c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid IN ({{leases_lit}}::regclass, {{fences_lit}}::regclass, {{token_seq_lit}}::regclass,
                        {{fence_resets_lit}}::regclass)
          AND a.grantee <> c.relowner
    LOOP
        IF g.relkind = 'S' THEN
            EXECUTE format('REVOKE USAGE, UPDATE ON SEQUENCE %s FROM %s', g.rel, g.who);
        ELSE
            EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON TABLE %s FROM %s', g.rel, g.who);
        END IF;
    END LOOP;
END
$revoke$;
