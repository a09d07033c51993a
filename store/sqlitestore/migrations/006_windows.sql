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
