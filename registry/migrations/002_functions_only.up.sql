-- tenure registry 002: the functions are the only interface of the
-- run-time role.
--
-- Every statement the registry runs becomes a function that runs as its
-- owner (SECURITY DEFINER) with a fixed search_path (pg_catalog, pg_temp;
-- every object name in a body is schema-qualified). A run-time role
-- granted EXECUTE on them (Config.GrantSQL) needs no privilege on the
-- tables, so it cannot forge a heartbeat, revive a dead agent, move an
-- ownership without a history row or rewrite the history. The bodies are
-- the statements of before, unchanged; $n are the function's arguments.
-- Every statement can run again without harm.

-- Register: insert the agent, or take its row over when the row's agent is
-- deregistered or stale by the server's clock, or is this very instance (a
-- retry); when another instance is alive under this id, change nothing and
-- report it. One statement.
-- $1 id, $2 instance, $3 nonce, $4 address, $5 labels (json text),
-- $6 capacity (json text or NULL), $7 heartbeat interval and $8 stale
-- after, in microseconds.
--
-- ON CONFLICT locks the existing row and judges its WHERE on the latest
-- committed version, so two racing registrations cannot both win. A
-- takeover continues the row's seq, so the chain of an id never restarts.
CREATE OR REPLACE FUNCTION {{agent_register_fn}}(p_id text, p_instance text, p_nonce text, p_address text, p_labels text, p_capacity text, p_heartbeat_interval_us bigint, p_stale_after_us bigint)
RETURNS TABLE (r_registered boolean, r_instance text, r_seq bigint, r_registered_at timestamptz, r_heartbeat_at timestamptz, r_age_us bigint, r_stale_after_us bigint, r_conflicts bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH ins AS (
        INSERT INTO {{agents}} AS a
            (id, instance, seq, beat_nonce, address, labels, capacity, heartbeat_interval_us, stale_after_us,
             registered_at, heartbeat_at, last_gap_us, deregistered)
        VALUES ($1, $2, 1, $3, $4, $5::text::jsonb, $6::text::jsonb, $7, $8,
                clock_timestamp(), clock_timestamp(), 0, false)
        ON CONFLICT (id) DO UPDATE SET
            instance              = excluded.instance,
            seq                   = a.seq + 1,
            beat_nonce            = excluded.beat_nonce,
            address               = excluded.address,
            labels                = excluded.labels,
            capacity              = excluded.capacity,
            heartbeat_interval_us = excluded.heartbeat_interval_us,
            stale_after_us        = excluded.stale_after_us,
            registered_at         = clock_timestamp(),
            heartbeat_at          = clock_timestamp(),
            last_gap_us           = 0,
            deregistered          = false
        WHERE a.deregistered
           OR a.instance = excluded.instance
           OR a.heartbeat_at + a.stale_after_us * interval '1 microsecond' <= clock_timestamp()
        RETURNING a.instance, a.seq, a.registered_at, a.heartbeat_at, a.stale_after_us, a.conflicts
    ),
    -- When the INSERT did not register, the row it conflicted with is locked by
    -- this statement; FOR SHARE reads its latest version. A row inserted by a
    -- transaction that committed after this statement began is invisible here:
    -- the statement then returns no row and the caller asks again.
    cur AS (
        SELECT c.instance, c.seq, c.registered_at, c.heartbeat_at, c.stale_after_us, c.conflicts
        FROM {{agents}} AS c
        WHERE c.id = $1 AND NOT EXISTS (SELECT 1 FROM ins)
        FOR SHARE
    )
    SELECT true AS registered, ins.instance, ins.seq, ins.registered_at, ins.heartbeat_at,
           0::bigint AS age_us, ins.stale_after_us, ins.conflicts
    FROM ins
    UNION ALL
    SELECT false, cur.instance, cur.seq, cur.registered_at, cur.heartbeat_at,
           greatest(0, floor(extract(epoch FROM clock_timestamp() - cur.heartbeat_at) * 1000000))::bigint,
           cur.stale_after_us, cur.conflicts
    FROM cur;
END
$body$;

-- Heartbeat: a compare-and-set on (id, instance, seq) that advances seq and
-- sets the heartbeat to the server's clock. A deregistered row never
-- matches. $1 id, $2 instance, $3 seq, $4 this heartbeat's nonce,
-- $5 the nonces of earlier heartbeats whose replies were lost (may be
-- empty).
--
-- The second arm recognises a lost reply: the row's last step was taken by
-- a heartbeat of this process, whose random nonce only this process knows.
-- A clone that advanced the chain itself left its own nonce, so it is still
-- told apart.
--
-- SET expressions read the row before the update: last_gap_us is the time
-- since the previous heartbeat.
CREATE OR REPLACE FUNCTION {{agent_heartbeat_fn}}(p_id text, p_instance text, p_seq bigint, p_nonce text, p_pending text[])
RETURNS TABLE (r_seq bigint, r_heartbeat_at timestamptz, r_last_gap_us bigint, r_stale_after_us bigint, r_conflicts bigint, r_last_conflict_at timestamptz, r_last_conflict_instance text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE {{agents}} AS a SET
        seq          = a.seq + 1,
        beat_nonce   = $4,
        last_gap_us  = greatest(0, floor(extract(epoch FROM clock_timestamp() - a.heartbeat_at) * 1000000))::bigint,
        heartbeat_at = clock_timestamp()
    WHERE a.id = $1
      AND a.instance = $2
      AND NOT a.deregistered
      AND (a.seq = $3 OR a.beat_nonce = ANY ($5::text[]))
    RETURNING a.seq, a.heartbeat_at, a.last_gap_us, a.stale_after_us, a.conflicts,
              a.last_conflict_at, coalesce(a.last_conflict_instance, '');
END
$body$;

-- Record a refused heartbeat or deregistration on the agent's row and
-- report the row as it is. Runs only after heartbeat.sql or deregister.sql
-- matched nothing; the WHERE keeps it from counting a row that matches
-- after all. $1 id, $2 instance, $3 seq.
CREATE OR REPLACE FUNCTION {{agent_conflict_fn}}(p_id text, p_instance text, p_seq bigint)
RETURNS TABLE (r_instance text, r_seq bigint, r_deregistered boolean, r_heartbeat_at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE {{agents}} AS a SET
        conflicts              = a.conflicts + 1,
        last_conflict_at       = clock_timestamp(),
        last_conflict_instance = $2
    WHERE a.id = $1
      AND NOT (a.instance = $2 AND a.seq = $3 AND NOT a.deregistered)
    RETURNING a.instance, a.seq, a.deregistered, a.heartbeat_at;
END
$body$;

-- Deregister: a compare-and-set on (id, instance, seq) that marks the agent
-- as gone (it is then dead to every reader at once) and advances seq. The
-- row stays: ownerships keep naming it. $1 id, $2 instance, $3 seq,
-- $4 the nonces of earlier heartbeats whose replies were lost (see
-- heartbeat.sql).
CREATE OR REPLACE FUNCTION {{agent_deregister_fn}}(p_id text, p_instance text, p_seq bigint, p_pending text[])
RETURNS TABLE (r_seq bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    UPDATE {{agents}} AS a SET
        seq          = a.seq + 1,
        beat_nonce   = '',
        deregistered = true
    WHERE a.id = $1
      AND a.instance = $2
      AND NOT a.deregistered
      AND (a.seq = $3 OR a.beat_nonce = ANY ($4::text[]))
    RETURNING a.seq;
END
$body$;

-- One agent as it is by the server's clock. $1 id.
CREATE OR REPLACE FUNCTION {{agent_get_fn}}(p_id text)
RETURNS TABLE (r_id text, r_instance text, r_seq bigint, r_address text, r_labels text, r_capacity text,
    r_heartbeat_interval_us bigint, r_stale_after_us bigint, r_registered_at timestamptz, r_heartbeat_at timestamptz,
    r_deregistered boolean, r_last_gap_us bigint, r_conflicts bigint, r_last_conflict_at timestamptz,
    r_last_conflict_instance text, r_alive boolean, r_age_us bigint, r_owned bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH now AS (SELECT clock_timestamp() AS t)
    SELECT {{agent_columns}},
           (SELECT count(*) FROM {{owners}} AS o WHERE o.agent_id = a.id) AS owned
    FROM {{agents}} AS a CROSS JOIN now
    WHERE a.id = $1;
END
$body$;

-- Every agent as it is by the server's clock, with the number of resources
-- it owns, ordered by id.
CREATE OR REPLACE FUNCTION {{agent_list_fn}}()
RETURNS TABLE (r_id text, r_instance text, r_seq bigint, r_address text, r_labels text, r_capacity text,
    r_heartbeat_interval_us bigint, r_stale_after_us bigint, r_registered_at timestamptz, r_heartbeat_at timestamptz,
    r_deregistered boolean, r_last_gap_us bigint, r_conflicts bigint, r_last_conflict_at timestamptz,
    r_last_conflict_instance text, r_alive boolean, r_age_us bigint, r_owned bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH now AS (SELECT clock_timestamp() AS t),
    owned AS (
        SELECT o.agent_id, count(*) AS n FROM {{owners}} AS o GROUP BY o.agent_id
    )
    SELECT {{agent_columns}}, coalesce(owned.n, 0) AS owned
    FROM {{agents}} AS a CROSS JOIN now
    LEFT JOIN owned ON owned.agent_id = a.id
    ORDER BY a.id COLLATE "C";
END
$body$;

-- The ownership of one resource and its agent as it is by the server's
-- clock. $1 resource.
--
-- A LEFT JOIN, never a filter on liveness: an ownership whose agent is
-- stale, deregistered or even missing is still returned, so it can never
-- read as "no owner" (the seed's first bug).
CREATE OR REPLACE FUNCTION {{owner_get_fn}}(p_resource text)
RETURNS TABLE (r_resource text, r_agent_id text, r_created_at timestamptz, r_updated_at timestamptz, r_metadata text,
    r_id text, r_instance text, r_seq bigint, r_address text, r_labels text, r_capacity text,
    r_heartbeat_interval_us bigint, r_stale_after_us bigint, r_registered_at timestamptz, r_heartbeat_at timestamptz,
    r_deregistered boolean, r_last_gap_us bigint, r_conflicts bigint, r_last_conflict_at timestamptz,
    r_last_conflict_instance text, r_alive boolean, r_age_us bigint, r_owned bigint)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH now AS (SELECT clock_timestamp() AS t)
    SELECT o.resource, o.agent_id, o.created_at, o.updated_at, o.metadata::text,
           {{agent_columns}}, 0::bigint AS owned
    FROM {{owners}} AS o CROSS JOIN now
    LEFT JOIN {{agents}} AS a ON a.id = o.agent_id
    WHERE o.resource = $1;
END
$body$;

-- Place: record agent $2 as the owner of resource $1, only if the resource
-- has no owner and the agent is alive by the server's clock at this
-- instant. $3 metadata (json text or NULL). Returns a row only when it
-- inserted; the caller then reads the ownership again either way.
CREATE OR REPLACE FUNCTION {{owner_place_fn}}(p_resource text, p_agent_id text, p_metadata text)
RETURNS TABLE (r_resource text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    INSERT INTO {{owners}} (resource, agent_id, created_at, updated_at, metadata)
    SELECT $1, a.id, clock_timestamp(), clock_timestamp(), $3::text::jsonb
    FROM {{agents}} AS a
    WHERE a.id = $2
      AND NOT a.deregistered
      AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > clock_timestamp()
    ON CONFLICT (resource) DO NOTHING
    RETURNING resource;
END
$body$;

-- Lock one ownership row for a reassignment and report its agent as it is
-- by the server's clock. $1 resource.
CREATE OR REPLACE FUNCTION {{owner_lock_fn}}(p_resource text)
RETURNS TABLE (r_agent_id text, r_alive boolean, r_heartbeat_at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH now AS (SELECT clock_timestamp() AS t)
    SELECT o.agent_id,
           coalesce(NOT a.deregistered AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > now.t, false) AS alive,
           a.heartbeat_at
    FROM {{owners}} AS o CROSS JOIN now
    LEFT JOIN {{agents}} AS a ON a.id = o.agent_id
    WHERE o.resource = $1
    FOR UPDATE OF o;
END
$body$;

-- Move resource $1 to agent $2 (locked by lock_owner.sql in the same
-- transaction) and record why. $3 previous agent, $4 reason, $5 whether the
-- previous agent was alive, $6 its last heartbeat (NULL if unknown).
CREATE OR REPLACE FUNCTION {{owner_reassign_fn}}(p_resource text, p_to_agent text, p_from_agent text, p_reason text, p_from_alive boolean, p_from_last_heartbeat timestamptz)
RETURNS TABLE (r_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH upd AS (
        UPDATE {{owners}} AS o SET agent_id = $2, updated_at = clock_timestamp()
        WHERE o.resource = $1 AND o.agent_id = $3
        RETURNING o.resource
    )
    INSERT INTO {{reassignments}} (resource, from_agent, to_agent, reason, from_alive, from_last_heartbeat, reassigned_at)
    SELECT $1, $3, $2, $4, $5, $6, clock_timestamp()
    FROM upd
    RETURNING id;
END
$body$;

-- The reassignments of resource $1, oldest first.
CREATE OR REPLACE FUNCTION {{owner_history_fn}}(p_resource text)
RETURNS TABLE (r_id bigint, r_resource text, r_from_agent text, r_to_agent text, r_reason text, r_from_alive boolean, r_from_last_heartbeat timestamptz, r_reassigned_at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT r.id, r.resource, r.from_agent, r.to_agent, r.reason, r.from_alive, r.from_last_heartbeat, r.reassigned_at
    FROM {{reassignments}} AS r
    WHERE r.resource = $1
    ORDER BY r.id;
END
$body$;

-- Remove the ownership of resource $1 from agent $2 (locked by
-- lock_owner.sql in the same transaction) and record why, as a history row
-- with an empty to_agent. $3 reason, $4 whether the agent was alive, $5 its
-- last heartbeat (NULL if unknown).
CREATE OR REPLACE FUNCTION {{owner_remove_fn}}(p_resource text, p_agent_id text, p_reason text, p_from_alive boolean, p_from_last_heartbeat timestamptz)
RETURNS TABLE (r_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH del AS (
        DELETE FROM {{owners}} AS o
        WHERE o.resource = $1 AND o.agent_id = $2
        RETURNING o.resource
    )
    INSERT INTO {{reassignments}} (resource, from_agent, to_agent, reason, from_alive, from_last_heartbeat, reassigned_at)
    SELECT $1, $2, '', $3, $4, $5, clock_timestamp()
    FROM del
    RETURNING id;
END
$body$;

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call these.
REVOKE ALL ON FUNCTION {{agent_register_fn}}(text, text, text, text, text, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{agent_heartbeat_fn}}(text, text, bigint, text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{agent_conflict_fn}}(text, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{agent_deregister_fn}}(text, text, bigint, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{agent_get_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{agent_list_fn}}() FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_get_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_place_fn}}(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_lock_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_reassign_fn}}(text, text, text, text, boolean, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_history_fn}}(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{owner_remove_fn}}(text, text, text, boolean, timestamptz) FROM PUBLIC;

-- Upgrade in place: before 002 the run-time role wrote the tables itself.
-- Take every privilege that can change them from every role but their
-- owner; read privileges stay. A run-time role then needs what
-- Config.GrantSQL prints now (EXECUTE on the functions).
DO $revoke$
DECLARE
    g record;
BEGIN
    FOR g IN
        SELECT DISTINCT c.oid::regclass::text AS rel,
               CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS who
        FROM pg_catalog.pg_class AS c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid IN ({{agents_lit}}::regclass, {{owners_lit}}::regclass, {{reassignments_lit}}::regclass)
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON TABLE %s FROM %s', g.rel, g.who);
    END LOOP;
END
$revoke$;
