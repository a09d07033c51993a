-- tenure 005: the history of every lease (store.Historian).
--
-- A trigger on the leases table records one row when a tenure starts (a row
-- inserted, or the token changed: granted after a release, taken over after
-- an expiry) and one when it is released (released turned true: by its
-- holder, or forced by an operator through force_release). Its WHEN clause
-- and column list keep renewals and check_lease_strict out: they change
-- seq, renewed_at and expires_at only, the trigger does not fire, and as no
-- index covers those columns their updates stay HOT (heap-only tuples,
-- no index writes). The history is written in the statement that makes the
-- change, so it shows exactly the changes that committed.
--
-- Every statement can run again without harm.

-- One row per recorded event; at is the server's clock (the new tenure's
-- acquired_at, or the moment of release).
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

-- record_history(): the trigger. Besides recording the event it deletes at
-- most 16 events older than the retention, oldest first, through the index
-- on at: the work per event is bounded however much is due, events of names
-- that went quiet are deleted too, and SKIP LOCKED keeps two tenures of
-- different names from waiting on each other's deletes. Every event deletes
-- up to 16, so the history never falls behind its retention for long.
--
-- A release is recorded as forced when the transaction-local setting
-- tenure.release_kind is 'force-released', which only force_release sets
-- (and clears again). A session that sets it itself can make its own
-- releases look forced, nothing more.
CREATE OR REPLACE FUNCTION {{record_history_fn}}()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at)
        VALUES (NEW.name, 'granted', NEW.holder_label, NEW.holder_instance, NEW.token, NEW.acquired_at);
    ELSIF NEW.token IS DISTINCT FROM OLD.token THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token,
                                 previous_holder_label, previous_holder_instance, previous_token, at)
        VALUES (NEW.name, CASE WHEN OLD.released THEN 'granted' ELSE 'taken-over' END,
                NEW.holder_label, NEW.holder_instance, NEW.token,
                OLD.holder_label, OLD.holder_instance, OLD.token, NEW.acquired_at);
    ELSIF NEW.released AND NOT OLD.released THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at)
        VALUES (NEW.name,
                CASE WHEN current_setting('tenure.release_kind', true) = 'force-released'
                     THEN 'force-released' ELSE 'released' END,
                NEW.holder_label, NEW.holder_instance, NEW.token, NEW.expires_at);
    ELSE
        RETURN NULL;
    END IF;

    DELETE FROM {{history}} AS h
    WHERE h.id IN (
        SELECT o.id
        FROM {{history}} AS o
        WHERE o.at < clock_timestamp() - (SELECT s.history_retention FROM {{settings}} AS s)
        ORDER BY o.at
        LIMIT 16
        FOR UPDATE SKIP LOCKED
    );
    RETURN NULL;
END
$body$;

DROP TRIGGER IF EXISTS record_history_insert ON {{leases}};
CREATE TRIGGER record_history_insert
    AFTER INSERT ON {{leases}}
    FOR EACH ROW EXECUTE FUNCTION {{record_history_fn}}();

DROP TRIGGER IF EXISTS record_history_update ON {{leases}};
CREATE TRIGGER record_history_update
    AFTER UPDATE OF token, released ON {{leases}}
    FOR EACH ROW
    WHEN (OLD.token IS DISTINCT FROM NEW.token OR (NEW.released AND NOT OLD.released))
    EXECUTE FUNCTION {{record_history_fn}}();

-- history_read(name, since, limit): the most recent limit events at or
-- after since (every event when null) of the lease name (of every lease
-- when null), oldest first. Read only; the read-only role may call it.
CREATE OR REPLACE FUNCTION {{history_read_fn}}(p_name text, p_since timestamptz, p_limit integer)
RETURNS TABLE (name text, kind text, holder_label text, holder_instance text, token bigint,
               previous_holder_label text, previous_holder_instance text, previous_token bigint,
               at timestamptz)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
#variable_conflict use_column
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'tenure: history: the limit must be between 1 and 10000, not %', p_limit
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT r.name, r.kind, r.holder_label, r.holder_instance, r.token,
           r.previous_holder_label, r.previous_holder_instance, r.previous_token, r.at
    FROM (
        SELECT h.id, h.name, h.kind, h.holder_label, h.holder_instance, h.token,
               h.previous_holder_label, h.previous_holder_instance, h.previous_token, h.at
        FROM {{history}} AS h
        WHERE (p_name IS NULL OR h.name = p_name)
          AND (p_since IS NULL OR h.at >= p_since)
        ORDER BY h.at DESC, h.id DESC
        LIMIT p_limit
    ) AS r
    ORDER BY r.at, r.id;
END
$body$;

-- force_release(name, holder_label, holder_instance, token): release, as
-- an operator's (tenure release --force): the same compare-and-set and
-- announcement, recorded as force-released. Returns what release returns.
CREATE OR REPLACE FUNCTION {{force_release_fn}}(p_name text, p_holder_label text, p_holder_instance text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    n bigint;
BEGIN
    PERFORM set_config('tenure.release_kind', 'force-released', true);
    n := {{release_fn}}(p_name, p_holder_label, p_holder_instance, p_token);
    PERFORM set_config('tenure.release_kind', '', true);
    RETURN n;
END
$body$;

REVOKE ALL ON FUNCTION {{record_history_fn}}() FROM PUBLIC;
REVOKE ALL ON FUNCTION {{history_read_fn}}(text, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION {{force_release_fn}}(text, text, text, bigint) FROM PUBLIC;
