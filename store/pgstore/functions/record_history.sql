-- revision 1
-- record_history(): the trigger on the leases table that records the
-- history (store.Historian). It records one row when a tenure starts (a row
-- inserted, or the token changed: granted after a release, taken over after
-- an expiry) and one when it is released (released turned true: by its
-- holder, or forced by an operator through force_release). The triggers'
-- WHEN clause and column list keep renewals and check_lease_strict out:
-- they change seq, renewed_at and expires_at only, the trigger does not
-- fire, and as no index covers those columns their updates stay HOT
-- (heap-only tuples, no index writes). The history is written in the
-- statement that makes the change, so it shows exactly the changes that
-- committed.
--
-- A release is recorded as forced when the transaction-local setting
-- tenure.release_kind is 'force-released', which only force_release sets
-- (and clears again). A session that sets it itself can make its own
-- releases look forced, nothing more.
--
-- Pruning: only the event whose id is a multiple of 16 looks for events
-- past the retention, and it deletes at most 256 of them, oldest first,
-- through the index on at: the history keeps up with its retention (at
-- most 16 deletions per event recorded) and each event's work stays
-- bounded (256 deletions at most, in one event in 16; ids skipped by
-- rolled-back transactions only make it look a little less often). Looking
-- after every event cost a third of a batch acquisition on this project's
-- 2-core test machine. The cutoff is computed first and passed as a value,
-- a bound of the index scan (computed in the statement from the volatile
-- clock_timestamp() it was not, and every event read the whole history).
-- The ids to delete are collected into an array first, so that the delete
-- finds them by the primary key whatever their number (a semi-join of 256
-- rows may be planned as a hash join over the whole history). SKIP LOCKED
-- keeps two tenures of different names from waiting on each other's
-- deletes.
CREATE OR REPLACE FUNCTION {{record_history_fn}}()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    event_id bigint;
    cutoff   timestamptz;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at)
        VALUES (NEW.name, 'granted', NEW.holder_label, NEW.holder_instance, NEW.token, NEW.acquired_at)
        RETURNING id INTO event_id;
    ELSIF NEW.token IS DISTINCT FROM OLD.token THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token,
                                 previous_holder_label, previous_holder_instance, previous_token, at)
        VALUES (NEW.name, CASE WHEN OLD.released THEN 'granted' ELSE 'taken-over' END,
                NEW.holder_label, NEW.holder_instance, NEW.token,
                OLD.holder_label, OLD.holder_instance, OLD.token, NEW.acquired_at)
        RETURNING id INTO event_id;
    ELSIF NEW.released AND NOT OLD.released THEN
        INSERT INTO {{history}} (name, kind, holder_label, holder_instance, token, at)
        VALUES (NEW.name,
                CASE WHEN current_setting('tenure.release_kind', true) = 'force-released'
                     THEN 'force-released' ELSE 'released' END,
                NEW.holder_label, NEW.holder_instance, NEW.token, NEW.expires_at)
        RETURNING id INTO event_id;
    ELSE
        RETURN NULL;
    END IF;
    IF event_id % 16 <> 0 THEN
        RETURN NULL;
    END IF;

    SELECT clock_timestamp() - s.history_retention INTO cutoff FROM {{settings}} AS s;
    DELETE FROM {{history}} AS h
    WHERE h.id = ANY (ARRAY(
        SELECT o.id
        FROM {{history}} AS o
        WHERE o.at < cutoff
        ORDER BY o.at
        LIMIT 256
        FOR UPDATE SKIP LOCKED
    ));
    RETURN NULL;
END
$body$;

-- The triggers that call it: dropped first, so that the file runs again
-- without harm.
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

-- Functions are executable by PUBLIC unless revoked: only the roles
-- Config.GrantSQL and Config.ReadGrantSQL name may call it.
REVOKE ALL ON FUNCTION {{record_history_fn}}() FROM PUBLIC;
