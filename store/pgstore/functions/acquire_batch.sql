-- revision 1
-- acquire_batch(names, holder_labels, holder_instances, ttls_us, payloads,
-- waits): the acquisitions of a batch as one set-based statement (acquire
-- once per lease costs a dozen statements, a waiter lookup and an
-- announcement per lease, about 150 µs each on this project's 2-core test
-- machine). It works on the arrays as sets:
--
--   1. take every lease of the batch that is free (released or expired,
--      and not kept for another follower) with one UPDATE, and create the
--      ones that have no row with one INSERT, in name order so that two
--      batches never wait for each other in a cycle. A row another
--      transaction has locked is skipped, not waited for: its lease is
--      answered with a null acquired, and the client asks again for it
--      alone (acquire waits for the lock). The token sequence is read only
--      for rows that are taken or created, so tokens skip no values here
--      (acquire's nextval in VALUES is evaluated on conflict too);
--   2. forget the waiters of the leases taken, and those whose time ran
--      out, skipping rows another transaction has locked (so batches never
--      wait for each other here either);
--   3. announce the acquisitions in as few notifications as fit: a JSON
--      array of the objects acquire announces per notification, each
--      under 8,000 bytes, PostgreSQL's limit;
--   4. put the refused callers that wait in line;
--   5. answer every lease, with its ordinal in the arrays.
--
-- Its statements are planned for each call (plan_cache_mode): a generic
-- plan assumes every array holds 10 elements and would join two arrays of
-- a thousand by nested loops; planning costs a fraction of a millisecond,
-- against milliseconds of work for a batch.
--
-- History is recorded by record_history's trigger for each lease taken,
-- as for acquire. Every rule of acquire holds: a lease kept for a follower is
-- taken only by that follower, a held lease is refused with its holder,
-- token, seq and the time it has left, and a refused caller that waits
-- learns its place.
CREATE OR REPLACE FUNCTION {{acquire_batch_fn}}(p_names text[], p_holder_labels text[], p_holder_instances text[],
                                                p_ttls_us bigint[], p_payloads text[], p_waits boolean[])
RETURNS TABLE (ord integer, acquired boolean, holder_label text, holder_instance text, token bigint, seq bigint,
               remaining_us bigint, payload text, pos integer, next_label text, next_instance text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
AS $body$
#variable_conflict use_column
DECLARE
    n   integer := cardinality(p_names);
    won text[];
BEGIN
    IF p_names IS NULL OR p_holder_labels IS NULL OR p_holder_instances IS NULL OR p_ttls_us IS NULL
       OR p_payloads IS NULL OR p_waits IS NULL
       OR array_position(p_names, NULL) IS NOT NULL OR array_position(p_holder_labels, NULL) IS NOT NULL
       OR array_position(p_holder_instances, NULL) IS NOT NULL OR array_position(p_ttls_us, NULL) IS NOT NULL
       OR array_position(p_payloads, NULL) IS NOT NULL OR array_position(p_waits, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'tenure: acquire_batch: arguments and their elements must not be null'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(p_holder_labels) <> n OR cardinality(p_holder_instances) <> n OR cardinality(p_ttls_us) <> n
       OR cardinality(p_payloads) <> n OR cardinality(p_waits) <> n THEN
        RAISE EXCEPTION 'tenure: acquire_batch: the arrays must have one element per lease (% names)', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n > 10000 THEN
        RAISE EXCEPTION 'tenure: acquire_batch: % leases in one batch; the maximum is 10000', n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1
               FROM unnest(p_names, p_holder_labels, p_holder_instances, p_ttls_us) AS u(name, hl, hi, ttl_us)
               WHERE u.name = '' OR u.hl = '' OR u.hi = '' OR u.ttl_us <= 0) THEN
        RAISE EXCEPTION 'tenure: acquire_batch: names and holders must not be empty and TTLs must be positive'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_payloads) AS u(payload) WHERE octet_length(u.payload) > 1024) THEN
        RAISE EXCEPTION 'tenure: acquire_batch: a payload is longer than 1024 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT count(DISTINCT u.name) FROM unnest(p_names) AS u(name)) <> n THEN
        RAISE EXCEPTION 'tenure: acquire_batch: a lease is named twice in one batch; ask for each once'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- 1. Take the free leases and create the missing ones.
    WITH u AS (
        SELECT *
        FROM unnest(p_names, p_holder_labels, p_holder_instances, p_ttls_us, p_payloads)
            AS u(name, hl, hi, ttl_us, payload)
    ),
    free AS (
        SELECT l.name
        FROM {{leases}} AS l
        JOIN u ON u.name = l.name
        WHERE (l.released OR l.expires_at <= clock_timestamp())
          AND (l.kept_until IS NULL OR l.kept_until <= clock_timestamp()
               OR (l.kept_label = u.hl AND l.kept_instance = u.hi))
        FOR NO KEY UPDATE OF l SKIP LOCKED
    ),
    taken AS (
        UPDATE {{leases}} AS l SET
            holder_label    = u.hl,
            holder_instance = u.hi,
            token           = nextval({{token_seq_lit}}::regclass),
            seq             = 1,
            acquired_at     = clock_timestamp(),
            renewed_at      = clock_timestamp(),
            expires_at      = clock_timestamp() + u.ttl_us * interval '1 microsecond',
            released        = false,
            payload         = u.payload,
            kept_label      = '',
            kept_instance   = '',
            kept_until      = NULL
        FROM u
        WHERE l.name = u.name AND l.name IN (SELECT f.name FROM free AS f)
        RETURNING l.name
    ),
    created AS (
        INSERT INTO {{leases}} AS l
            (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at, released, payload)
        SELECT u.name, u.hl, u.hi, nextval({{token_seq_lit}}::regclass), 1, clock_timestamp(), clock_timestamp(),
               clock_timestamp() + u.ttl_us * interval '1 microsecond', false, u.payload
        FROM u
        WHERE NOT EXISTS (SELECT 1 FROM {{leases}} AS e WHERE e.name = u.name)
        ORDER BY u.name
        ON CONFLICT (name) DO NOTHING
        RETURNING l.name
    )
    SELECT coalesce(array_agg(w.name), '{}') INTO won
    FROM (SELECT t.name FROM taken AS t UNION ALL SELECT c.name FROM created AS c) AS w;

    -- 2. Forget the winners' places and the waiters whose time ran out
    -- (rows another transaction is changing are left to it).
    DELETE FROM {{waiters}} AS w
    WHERE (w.name, w.holder_label, w.holder_instance) IN (
        SELECT x.name, x.holder_label, x.holder_instance
        FROM {{waiters}} AS x
        JOIN unnest(p_names, p_holder_labels, p_holder_instances) AS u(name, hl, hi) ON u.name = x.name
        LEFT JOIN unnest(won) AS m(name) ON m.name = u.name
        WHERE x.until <= clock_timestamp()
           OR (m.name IS NOT NULL AND x.holder_label = u.hl AND x.holder_instance = u.hi)
        FOR UPDATE OF x SKIP LOCKED
    );

    -- 3. Announce the acquisitions, each notification under 8,000 bytes
    -- (an element is at most about 1,000: see the length limits of
    -- store.ValidateText's callers).
    PERFORM pg_notify({{channel_lit}}, '[' || string_agg(a.e, ',' ORDER BY a.name) || ']')
    FROM (
        SELECT s.name, s.e, sum(octet_length(s.e) + 1) OVER (ORDER BY s.name) / 6500 AS part
        FROM (
            SELECT u.name, json_build_object('n', u.name, 'k', 'a', 'hl', u.hl, 'hi', u.hi, 'ttl', u.ttl_us)::text AS e
            FROM unnest(p_names, p_holder_labels, p_holder_instances, p_ttls_us) AS u(name, hl, hi, ttl_us)
            JOIN unnest(won) AS m(name) ON m.name = u.name
        ) AS s
    ) AS a
    GROUP BY a.part;

    -- 4. Put the refused callers that wait in line (or keep their place
    -- until twice their TTL after the time the lease has left).
    INSERT INTO {{waiters}} AS w (name, holder_label, holder_instance, until)
    SELECT u.name, u.hl, u.hi,
           clock_timestamp() + 2 * u.ttl_us * interval '1 microsecond'
             + greatest(interval '0', CASE WHEN NOT l.released AND l.expires_at > clock_timestamp()
                                          THEN l.expires_at ELSE l.kept_until END - clock_timestamp())
    FROM unnest(p_names, p_holder_labels, p_holder_instances, p_ttls_us, p_waits) AS u(name, hl, hi, ttl_us, wait)
    JOIN {{leases}} AS l ON l.name = u.name
    LEFT JOIN unnest(won) AS m(name) ON m.name = u.name
    WHERE u.wait AND m.name IS NULL
      AND ((NOT l.released AND l.expires_at > clock_timestamp())
           OR (l.kept_until > clock_timestamp() AND NOT (l.kept_label = u.hl AND l.kept_instance = u.hi)))
    ORDER BY u.name
    ON CONFLICT (name, holder_label, holder_instance) DO UPDATE SET until = excluded.until;

    -- 5. Answer every lease: taken (true), held or kept for another
    -- (false), or ask again alone (null: its row was locked, or it became
    -- free after step 1).
    RETURN QUERY
    SELECT r.ord, r.acquired,
           CASE WHEN r.kept THEN '' ELSE r.holder_label END,
           CASE WHEN r.kept THEN '' ELSE r.holder_instance END,
           r.token, r.seq,
           greatest(0, floor(extract(epoch FROM CASE WHEN r.kept THEN r.kept_until ELSE r.expires_at END
                                                - clock_timestamp()) * 1000000))::bigint,
           CASE WHEN r.kept THEN '' ELSE r.payload END,
           CASE WHEN r.acquired = false AND r.wait THEN
               (SELECT count(*)::integer
                FROM {{waiters}} AS q
                WHERE q.name = r.name
                  AND q.ticket <= (SELECT me.ticket FROM {{waiters}} AS me
                                   WHERE me.name = r.name AND me.holder_label = r.hl AND me.holder_instance = r.hi))
           ELSE 0 END,
           CASE WHEN r.kept THEN r.kept_label ELSE '' END,
           CASE WHEN r.kept THEN r.kept_instance ELSE '' END
    FROM (
        SELECT u.ord::integer AS ord, u.name, u.hl, u.hi, u.wait,
               CASE WHEN m.name IS NOT NULL THEN true
                    WHEN l.name IS NULL THEN NULL
                    WHEN NOT l.released AND l.expires_at > clock_timestamp() THEN false
                    WHEN l.kept_until > clock_timestamp() AND NOT (l.kept_label = u.hl AND l.kept_instance = u.hi)
                        THEN false
               END AS acquired,
               m.name IS NULL AND l.name IS NOT NULL
                   AND NOT (NOT l.released AND l.expires_at > clock_timestamp()) AS kept,
               l.holder_label, l.holder_instance, l.token, l.seq, l.expires_at, l.payload,
               l.kept_label, l.kept_instance, l.kept_until
        FROM unnest(p_names, p_holder_labels, p_holder_instances, p_waits) WITH ORDINALITY AS u(name, hl, hi, wait, ord)
        LEFT JOIN {{leases}} AS l ON l.name = u.name
        LEFT JOIN unnest(won) AS m(name) ON m.name = u.name
    ) AS r
    ORDER BY r.ord;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{acquire_batch_fn}}(text[], text[], text[], bigint[], text[], boolean[]) FROM PUBLIC;
