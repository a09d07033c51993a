-- tenure 002: the windows of store.Windower (tenure run --once-per). The
-- functions window_start, window_finish and window_get, in functions/, are
-- the run-time role's only way to them. Every statement can run again
-- without harm.

-- One row per lease name and window key, never deleted: a window that ran
-- stays refused. holder_label, holder_instance and token are the tenure
-- that began it last (in the statement that found that tenure held, under
-- a FOR SHARE lock of its lease row), attempts counts the tenures that
-- began it, started_at and finished_at are the server's clock.
CREATE TABLE IF NOT EXISTS {{windows}} (
    name            text        NOT NULL,
    window_key      text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
    holder_label    text        NOT NULL,
    holder_instance text        NOT NULL,
    token           bigint      NOT NULL CHECK (token > 0),
    attempts        bigint      NOT NULL CHECK (attempts > 0),
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz,
    PRIMARY KEY (name, window_key)
);

-- The history records the windows too (store.EventWindowStarted,
-- EventWindowCompleted, EventWindowFailed, written by window_start and
-- window_finish in their statement), with their key in window_key (null
-- for the other events). The check of kind is replaced by a wider one:
-- every check on kind is dropped first, so the block runs again without
-- harm. history_read leaves these events out for older libraries;
-- history_events returns them.
ALTER TABLE {{history}} ADD COLUMN IF NOT EXISTS window_key text;
DO $kind$
DECLARE
    c record;
BEGIN
    FOR c IN
        SELECT k.conname FROM pg_catalog.pg_constraint AS k
        WHERE k.conrelid = {{history_lit}}::regclass AND k.contype = 'c'
          AND pg_catalog.pg_get_constraintdef(k.oid) LIKE '%kind%'
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', {{history_lit}}::regclass, c.conname);
    END LOOP;
    EXECUTE format('ALTER TABLE %s ADD CHECK (kind IN (%L, %L, %L, %L, %L, %L, %L))', {{history_lit}}::regclass,
                   'granted', 'taken-over', 'released', 'force-released',
                   'window-started', 'window-completed', 'window-failed');
END
$kind$;

-- Only the functions write the table (see migration 001).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON TABLE {{windows}} FROM PUBLIC;
