-- tenure 007: followers wait in line, and announcements say what happened.
--
-- waiters holds the followers that asked to wait for a lease
-- (store.AcquireParams.Wait), first come first by ticket. A follower keeps
-- its place while it keeps asking; it is forgotten at until, twice its TTL
-- after the expiry it was last told (rows past it are ignored, and deleted
-- by the next acquire or release of the lease).
--
-- A release keeps the lease for the head of the line for 250 ms
-- (store.Handoff): leases.kept_label and kept_instance name it, kept_until
-- ends the hold. Meanwhile acquire refuses anyone else, reporting no
-- holder and the follower it is kept for. The hold only orders followers:
-- it never extends a tenure, and a follower that does not come loses it
-- after 250 ms. Renewals do not touch these columns (and none is indexed),
-- so they stay HOT updates (migration 004).
--
-- Announcements become JSON: {"n": name, "k": "a", "hl": label, "hi":
-- instance, "ttl": microseconds} for an acquisition, {"n": name, "k": "r",
-- "nl": label, "ni": instance} for a release (nl and ni empty when nobody
-- waits). A listener of an older library reads the whole payload as a
-- name it does not know, and waits for expiries instead.
--
-- acquire gets a sixth argument (wait) and reports the caller's place and
-- the follower a released lease is kept for; it is a new function, which
-- gets EXECUTE for exactly the roles that could execute the one it
-- replaces, as in 006. release keeps its signature.

CREATE TABLE IF NOT EXISTS {{waiters}} (
    name            text        NOT NULL,
    holder_label    text        NOT NULL,
    holder_instance text        NOT NULL,
    ticket          bigint      GENERATED ALWAYS AS IDENTITY,
    until           timestamptz NOT NULL,
    PRIMARY KEY (name, holder_label, holder_instance)
);
CREATE INDEX IF NOT EXISTS {{waiters_line_idx}} ON {{waiters}} (name, ticket);
REVOKE ALL ON TABLE {{waiters}} FROM PUBLIC;

ALTER TABLE {{leases}} ADD COLUMN IF NOT EXISTS kept_label text NOT NULL DEFAULT '';
ALTER TABLE {{leases}} ADD COLUMN IF NOT EXISTS kept_instance text NOT NULL DEFAULT '';
ALTER TABLE {{leases}} ADD COLUMN IF NOT EXISTS kept_until timestamptz;

-- acquire(name, holder_label, holder_instance, ttl_us, payload, wait): as
-- in 006, except that a lease kept for another follower is not taken, and
-- a refused caller that waits is put in line (or keeps its place). Returns
-- one row, or none when the lease row was inserted by a transaction this
-- statement cannot see (the caller asks again).
CREATE OR REPLACE FUNCTION {{acquire_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_ttl_us bigint,
                                          p_payload text, p_wait boolean)
RETURNS TABLE (acquired boolean, holder_label text, holder_instance text, token bigint, seq bigint, remaining_us bigint,
               payload text, pos integer, next_label text, next_instance text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
DECLARE
    r      record;
    place     integer := 0;
    my_ticket bigint;
BEGIN
    IF p_name IS NULL OR p_holder_label IS NULL OR p_holder_instance IS NULL OR p_ttl_us IS NULL OR p_payload IS NULL
       OR p_wait IS NULL THEN
        RAISE EXCEPTION 'tenure: acquire: arguments must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_name = '' OR p_holder_label = '' OR p_holder_instance = '' OR p_ttl_us <= 0 THEN
        RAISE EXCEPTION 'tenure: acquire: name and holder must not be empty and the TTL must be positive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(p_payload) > 1024 THEN
        RAISE EXCEPTION 'tenure: acquire: the payload is % bytes long; the maximum is 1024', octet_length(p_payload)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH ins AS (
        INSERT INTO {{leases}} AS l
            (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at, released, payload)
        VALUES (p_name, p_holder_label, p_holder_instance, nextval({{token_seq_lit}}::regclass), 1,
                clock_timestamp(), clock_timestamp(), clock_timestamp() + p_ttl_us * interval '1 microsecond', false,
                p_payload)
        ON CONFLICT (name) DO UPDATE SET
            holder_label    = excluded.holder_label,
            holder_instance = excluded.holder_instance,
            token           = nextval({{token_seq_lit}}::regclass),
            seq             = 1,
            acquired_at     = clock_timestamp(),
            renewed_at      = clock_timestamp(),
            expires_at      = clock_timestamp() + p_ttl_us * interval '1 microsecond',
            released        = false,
            payload         = excluded.payload,
            kept_label      = '',
            kept_instance   = '',
            kept_until      = NULL
        WHERE (l.released OR l.expires_at <= clock_timestamp())
          AND (l.kept_until IS NULL OR l.kept_until <= clock_timestamp()
               OR (l.kept_label = excluded.holder_label AND l.kept_instance = excluded.holder_instance))
        RETURNING l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at, l.payload
    ),
    cur AS (
        SELECT c.holder_label, c.holder_instance, c.token, c.seq, c.expires_at, c.payload, c.released,
               c.kept_label, c.kept_instance, c.kept_until
        FROM {{leases}} AS c
        WHERE c.name = p_name AND NOT EXISTS (SELECT 1 FROM ins)
        FOR SHARE
    )
    SELECT true AS acquired, ins.holder_label, ins.holder_instance, ins.token, ins.seq,
           greatest(0, floor(extract(epoch FROM ins.expires_at - clock_timestamp()) * 1000000))::bigint AS remaining_us,
           ins.payload, '' AS next_label, '' AS next_instance
    FROM ins
    UNION ALL
    SELECT false, cur.holder_label, cur.holder_instance, cur.token, cur.seq,
           greatest(0, floor(extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000))::bigint,
           cur.payload, '', ''
    FROM cur
    WHERE NOT cur.released AND cur.expires_at > clock_timestamp()
    UNION ALL
    SELECT false, '', '', cur.token, cur.seq,
           greatest(0, floor(extract(epoch FROM cur.kept_until - clock_timestamp()) * 1000000))::bigint,
           '', cur.kept_label, cur.kept_instance
    FROM cur
    WHERE cur.released OR cur.expires_at <= clock_timestamp()
    INTO r;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF r.acquired THEN
        DELETE FROM {{waiters}} AS w
        WHERE w.name = p_name
          AND ((w.holder_label = p_holder_label AND w.holder_instance = p_holder_instance)
               OR w.until <= clock_timestamp());
        PERFORM pg_notify({{channel_lit}}, json_build_object('n', p_name, 'k', 'a', 'hl', p_holder_label,
                                                             'hi', p_holder_instance, 'ttl', p_ttl_us)::text);
    ELSIF p_wait THEN
        DELETE FROM {{waiters}} AS w WHERE w.name = p_name AND w.until <= clock_timestamp();
        INSERT INTO {{waiters}} AS w (name, holder_label, holder_instance, until)
        VALUES (p_name, p_holder_label, p_holder_instance,
                clock_timestamp() + (r.remaining_us + 2 * p_ttl_us) * interval '1 microsecond')
        ON CONFLICT (name, holder_label, holder_instance) DO UPDATE SET until = excluded.until
        RETURNING w.ticket INTO my_ticket;
        SELECT count(*) INTO place FROM {{waiters}} AS w WHERE w.name = p_name AND w.ticket <= my_ticket;
    END IF;
    RETURN QUERY SELECT r.acquired, r.holder_label, r.holder_instance, r.token, r.seq, r.remaining_us, r.payload,
                        place, r.next_label, r.next_instance;
END
$body$;

-- release(name, holder_label, holder_instance, token): as in 003, and the
-- lease is kept for the head of the line, which the announcement names.
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

REVOKE ALL ON FUNCTION {{acquire_fn}}(text, text, text, bigint, text, boolean) FROM PUBLIC;

DO $grants$
DECLARE
    old_fn regprocedure := to_regprocedure({{acquire_fn_lit}} || '(text, text, text, bigint, text)');
    new_fn regprocedure := to_regprocedure({{acquire_fn_lit}} || '(text, text, text, bigint, text, boolean)');
    g      record;
BEGIN
    IF old_fn IS NULL THEN
        RETURN;
    END IF;
    FOR g IN
        SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                             ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS who
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
        WHERE p.oid = old_fn AND a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', new_fn, g.who);
    END LOOP;
    EXECUTE format('DROP FUNCTION %s', old_fn);
END
$grants$;
