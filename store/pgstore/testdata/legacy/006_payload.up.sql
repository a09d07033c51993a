-- tenure 006: a holder publishes a payload with its tenure.
--
-- leases.payload is what the holder of the current or last tenure
-- published (store.AcquireParams.Payload: its address, typically); empty
-- when it published none. acquire takes it and returns the holder's
-- payload, whoever holds the lease, so a refused follower learns it in the
-- same round trip; get and list return it. A renewal never changes it.
--
-- acquire gets a new signature, and get and list a new result under new
-- names (get_lease, list_leases: a function cannot change its result in
-- place, and the printed script of Config.MigrationSQL runs 003 again,
-- which must still find its own get and list to replace). Each new function
-- gets EXECUTE for exactly the roles that could execute the one it replaces
-- (a role set up with Config.GrantSQL or ReadGrantSQL keeps working without
-- a new GRANT); then the replaced functions are dropped. Every object name
-- in a body is schema-qualified and search_path is pg_catalog, pg_temp, as
-- in 003.

ALTER TABLE {{leases}} ADD COLUMN IF NOT EXISTS payload text NOT NULL DEFAULT '';

-- acquire(name, holder_label, holder_instance, ttl_us, payload): as in 003,
-- and the new tenure takes payload.
CREATE OR REPLACE FUNCTION {{acquire_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_ttl_us bigint,
                                          p_payload text)
RETURNS TABLE (acquired boolean, holder_label text, holder_instance text, token bigint, seq bigint, remaining_us bigint,
               payload text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    IF p_name IS NULL OR p_holder_label IS NULL OR p_holder_instance IS NULL OR p_ttl_us IS NULL OR p_payload IS NULL THEN
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
    RETURN QUERY
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
            payload         = excluded.payload
        WHERE l.released OR l.expires_at <= clock_timestamp()
        RETURNING l.name, l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at, l.payload
    ),
    cur AS (
        SELECT c.holder_label, c.holder_instance, c.token, c.seq, c.expires_at, c.payload
        FROM {{leases}} AS c
        WHERE c.name = p_name AND NOT EXISTS (SELECT 1 FROM ins)
        FOR SHARE
    )
    SELECT true, ins.holder_label, ins.holder_instance, ins.token, ins.seq,
           greatest(0, floor(extract(epoch FROM ins.expires_at - clock_timestamp()) * 1000000))::bigint,
           ins.payload
    FROM ins CROSS JOIN LATERAL pg_notify({{channel_lit}}, ins.name) AS n
    UNION ALL
    SELECT false, cur.holder_label, cur.holder_instance, cur.token, cur.seq,
           greatest(0, floor(extract(epoch FROM cur.expires_at - clock_timestamp()) * 1000000))::bigint,
           cur.payload
    FROM cur;
END
$body$;

-- get_lease(name) and list_leases(): get and list of 003, with the payload.
CREATE OR REPLACE FUNCTION {{get_lease_fn}}(p_name text)
RETURNS TABLE (name text, holder_label text, holder_instance text, token bigint, seq bigint,
               acquired_at timestamptz, released boolean, held boolean, remaining_us bigint, payload text)
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
           greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint,
           l.payload
    FROM {{leases}} AS l
    WHERE l.name = p_name;
END
$body$;

CREATE OR REPLACE FUNCTION {{list_leases_fn}}()
RETURNS TABLE (name text, holder_label text, holder_instance text, token bigint, seq bigint,
               acquired_at timestamptz, released boolean, held boolean, remaining_us bigint, payload text)
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
           greatest(0, floor(extract(epoch FROM l.expires_at - clock_timestamp()) * 1000000))::bigint,
           l.payload
    FROM {{leases}} AS l
    ORDER BY l.name COLLATE "C";
END
$body$;

REVOKE ALL ON FUNCTION {{acquire_fn}}(text, text, text, bigint, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{get_lease_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{list_leases_fn}}() FROM PUBLIC;

-- Whoever (other than the owner) could execute an old function may execute
-- its successor; then the old functions go.
DO $grants$
DECLARE
    pair record;
    g    record;
BEGIN
    FOR pair IN
        SELECT v.old_fn, v.new_fn
        FROM (VALUES
            (to_regprocedure({{acquire_fn_lit}} || '(text, text, text, bigint)'),
             to_regprocedure({{acquire_fn_lit}} || '(text, text, text, bigint, text)')),
            (to_regprocedure({{get_fn_lit}} || '(text)'), to_regprocedure({{get_lease_fn_lit}} || '(text)')),
            (to_regprocedure({{list_fn_lit}} || '()'), to_regprocedure({{list_leases_fn_lit}} || '()'))
        ) AS v(old_fn, new_fn)
        WHERE v.old_fn IS NOT NULL
    LOOP
        FOR g IN
            SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC'
                                 ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS who
            FROM pg_catalog.pg_proc AS p
            CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) AS a
            WHERE p.oid = pair.old_fn AND a.grantee <> p.proowner AND a.privilege_type = 'EXECUTE'
        LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s', pair.new_fn, g.who);
        END LOOP;
        EXECUTE format('DROP FUNCTION %s', pair.old_fn);
    END LOOP;
END
$grants$;
