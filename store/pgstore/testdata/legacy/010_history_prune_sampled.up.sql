-- tenure 010: the history is pruned by one event in 16, sixteen times as
-- much each time.
--
-- record_history (migrations 005 and 008) looked for events past the
-- retention after every event it recorded: two statements (the retention
-- and the delete) per acquisition and per release, nearly always finding
-- nothing. They cost a third of a batch acquisition on this project's
-- 2-core test machine. Now only the event whose id is a multiple of 16
-- looks, and it deletes at most 256 events past the retention, oldest
-- first: the history keeps up with its retention at the same pace (at most
-- 16 deletions per event recorded) and each event's work stays bounded
-- (256 deletions at most, in one event in 16; ids skipped by rolled-back
-- transactions only make it look a little less often). The ids to delete
-- are collected into an array first, so that the delete finds them by the
-- primary key whatever their number (a semi-join of 256 rows may be
-- planned as a hash join over the whole history).
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
