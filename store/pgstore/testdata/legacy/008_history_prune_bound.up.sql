-- tenure 008: the history's pruning reads only what it deletes.
--
-- record_history (migration 005) deletes up to 16 events older than the
-- retention after recording each one. Its cutoff was computed in the
-- statement from clock_timestamp(), which is volatile, so PostgreSQL could
-- not use it as a bound of the index on at: every acquisition and release
-- read the whole history through that index, and their cost grew with it
-- (13 ms each with 36,000 events, against 1 ms without). The cutoff is now
-- computed first and passed as a value, a bound of the index scan.
CREATE OR REPLACE FUNCTION {{record_history_fn}}()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $body$
DECLARE
    cutoff timestamptz;
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

    SELECT clock_timestamp() - s.history_retention INTO cutoff FROM {{settings}} AS s;
    DELETE FROM {{history}} AS h
    WHERE h.id IN (
        SELECT o.id
        FROM {{history}} AS o
        WHERE o.at < cutoff
        ORDER BY o.at
        LIMIT 16
        FOR UPDATE SKIP LOCKED
    );
    RETURN NULL;
END
$body$;
