-- revision 1
-- acquire(name, holder_label, holder_instance, ttl_us, payload, wait): take
-- the lease when it is absent, released or expired by the server's clock
-- and not kept for another follower (release keeps a released lease for
-- the head of the line for 250 ms, store.Handoff), else report who holds
-- it. One statement. The new tenure takes payload; the answer carries the
-- holder's payload whoever holds the lease, so a refused follower learns
-- it in the same round trip. A refused caller that waits is put in line
-- (or keeps its place) and learns its position.
--
-- ON CONFLICT locks the existing row first and only then judges its WHERE
-- on the latest committed version, so two racing acquirers cannot both
-- win. A takeover draws its token in SET, after the lock: it is greater
-- than every token handed out before it for this name. (The nextval in
-- VALUES is evaluated on conflict too; the values it burns are harmless.)
-- Returns one row, or none when the lease row was inserted by a
-- transaction this statement cannot see (the caller asks again).
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

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{acquire_fn}}(text, text, text, bigint, text, boolean) FROM PUBLIC;
