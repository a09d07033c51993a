-- tenure 001: the tables, the token sequence and their indexes. The
-- functions, the run-time role's only way to them, live in functions/, one
-- file each, and are installed by every Migrate after the migrations (see
-- the package documentation). Every statement can run again without harm.

-- One row per lease name, never deleted: deleting a row would lose nothing
-- of the token order (the sequence keeps it), but it would lose who held
-- the lease last.
--
-- payload is what the holder of the current or last tenure published
-- (store.AcquireParams.Payload: its address, typically); empty when it
-- published none. A renewal never changes it.
--
-- A release keeps the lease for the head of the line for 250 ms
-- (store.Handoff): kept_label and kept_instance name that follower,
-- kept_until ends the hold. The hold only orders followers: it never
-- extends a tenure.
--
-- Renewals update a row in place. A renewal changes seq, renewed_at and
-- expires_at; none of them is indexed, so PostgreSQL can make the update
-- heap-only (HOT: no new index entry, and the old version is pruned by the
-- next visitor of the page) whenever the row's page has room for the new
-- version. At the default fillfactor of 100 the pages are full: measured on
-- PostgreSQL 15 with 2,000 leases renewed 20 times each, 5% of the updates
-- were HOT and 38,501 dead tuples were left for vacuum; at fillfactor 50,
-- 99.8% were HOT, 2,122 were left, and the table ended smaller (400 kB
-- against 3.7 MB). Lease rows are few and small, so the space held back
-- costs little. Keep it that way: an index on a column a renewal changes
-- would make every renewal a non-HOT update again.
CREATE TABLE IF NOT EXISTS {{leases}} (
    name            text        PRIMARY KEY,
    holder_label    text        NOT NULL,
    holder_instance text        NOT NULL,
    token           bigint      NOT NULL CHECK (token > 0),
    seq             bigint      NOT NULL CHECK (seq > 0),
    acquired_at     timestamptz NOT NULL,
    renewed_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    released        boolean     NOT NULL DEFAULT false,
    payload         text        NOT NULL DEFAULT '',
    kept_label      text        NOT NULL DEFAULT '',
    kept_instance   text        NOT NULL DEFAULT '',
    kept_until      timestamptz
) WITH (fillfactor = 50);

-- Every new tenure draws its token here, so tokens only go up, across
-- releases, deleted rows and restarts. It hands out one value at a time: a
-- sequence with CACHE n > 1 gives each session n values at once, so two
-- sessions draw out of order (one takes 1..20, the next 21..40, and the
-- first then hands out 2 after 21): a takeover could get a token lower
-- than one handed out before it, which breaks promise P2. The ALTER sets
-- CACHE 1 on a sequence that was made otherwise before the first
-- migration; Store.Migrate fails when it finds it altered since.
CREATE SEQUENCE IF NOT EXISTS {{token_seq}} AS bigint MINVALUE 1 NO CYCLE CACHE 1;
ALTER SEQUENCE {{token_seq}} CACHE 1;

-- The highest token each resource accepted.
CREATE TABLE IF NOT EXISTS {{fences}} (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

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

-- One row per recorded event of the history (store.Historian, written by
-- the trigger function record_history); at is the server's clock (the new
-- tenure's acquired_at, or the moment of release).
CREATE TABLE IF NOT EXISTS {{history}} (
    id                       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                     text        NOT NULL,
    kind                     text        NOT NULL
        CHECK (kind IN ('granted', 'taken-over', 'released', 'force-released')),
    holder_label             text        NOT NULL,
    holder_instance          text        NOT NULL,
    token                    bigint      NOT NULL,
    previous_holder_label    text,
    previous_holder_instance text,
    previous_token           bigint,
    at                       timestamptz NOT NULL
);

-- Reads of one lease (history_read with a name) and of the whole store,
-- newest first; the second also serves the retention's deletes.
CREATE INDEX IF NOT EXISTS {{history_name_at_idx}} ON {{history}} (name, at);
CREATE INDEX IF NOT EXISTS {{history_at_idx}} ON {{history}} (at);

-- The store's settings: one row. history_retention is how long events are
-- kept; Store.Migrate sets it from Config.HistoryRetention.
CREATE TABLE IF NOT EXISTS {{settings}} (
    id                boolean  PRIMARY KEY DEFAULT true CHECK (id),
    history_retention interval NOT NULL DEFAULT interval '30 days'
        CHECK (history_retention >= interval '1 minute')
);
INSERT INTO {{settings}} (id) VALUES (true) ON CONFLICT (id) DO NOTHING;

-- The followers that asked to wait for a lease (store.AcquireParams.Wait),
-- first come first by ticket. A follower keeps its place while it keeps
-- asking; it is forgotten at until, twice its TTL after the expiry it was
-- last told (rows past it are ignored, and deleted by the next acquire or
-- release of the lease).
CREATE TABLE IF NOT EXISTS {{waiters}} (
    name            text        NOT NULL,
    holder_label    text        NOT NULL,
    holder_instance text        NOT NULL,
    ticket          bigint      GENERATED ALWAYS AS IDENTITY,
    until           timestamptz NOT NULL,
    PRIMARY KEY (name, holder_label, holder_instance)
);
CREATE INDEX IF NOT EXISTS {{waiters_line_idx}} ON {{waiters}} (name, ticket);

-- Only the functions write the tables. Take every privilege that can
-- change them from every role but their owner (a default privilege of the
-- schema could have granted one); read privileges stay.
REVOKE ALL ON TABLE {{waiters}} FROM PUBLIC;
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
