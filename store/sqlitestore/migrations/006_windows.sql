-- The windows of store.Windower: one row per lease name and window key,
-- begun (state 'started') by the tenure holder_label/holder_instance/token
-- in the transaction that found that tenure held, and finished
-- ('completed' or 'failed') by the same tenure. attempts counts the
-- tenures that began it; started_at and finished_at are the host clock in
-- nanoseconds (finished_at 0 while started). Rows are never deleted: a
-- window that ran stays refused.
CREATE TABLE IF NOT EXISTS tenure_windows (
    name            TEXT    NOT NULL,
    window_key      TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('started', 'completed', 'failed')),
    holder_label    TEXT    NOT NULL,
    holder_instance TEXT    NOT NULL,
    token           INTEGER NOT NULL,
    attempts        INTEGER NOT NULL,
    started_at      INTEGER NOT NULL,
    finished_at     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (name, window_key)
) STRICT;

-- The history records windows too (store.EventWindowStarted,
-- EventWindowCompleted, EventWindowFailed), with their key in window_key
-- (NULL for the other events). SQLite cannot change a CHECK constraint in
-- place: the table is made anew with the wider one and the rows copied, in
-- the migration's transaction.
CREATE TABLE tenure_history_windows (
    id                       INTEGER PRIMARY KEY,
    name                     TEXT    NOT NULL,
    kind                     TEXT    NOT NULL
        CHECK (kind IN ('granted', 'taken-over', 'released', 'force-released',
                        'window-started', 'window-completed', 'window-failed')),
    holder_label             TEXT    NOT NULL,
    holder_instance          TEXT    NOT NULL,
    token                    INTEGER NOT NULL,
    previous_holder_label    TEXT,
    previous_holder_instance TEXT,
    previous_token           INTEGER,
    at                       INTEGER NOT NULL,
    window_key               TEXT
) STRICT;
INSERT INTO tenure_history_windows
    (id, name, kind, holder_label, holder_instance, token, previous_holder_label, previous_holder_instance,
     previous_token, at)
SELECT id, name, kind, holder_label, holder_instance, token, previous_holder_label, previous_holder_instance,
       previous_token, at
FROM tenure_history;
DROP TABLE tenure_history;
ALTER TABLE tenure_history_windows RENAME TO tenure_history;
CREATE INDEX IF NOT EXISTS tenure_history_name_at ON tenure_history (name, at);
CREATE INDEX IF NOT EXISTS tenure_history_at ON tenure_history (at);
