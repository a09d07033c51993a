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

-- Only the functions write the table (see migration 001).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON TABLE {{windows}} FROM PUBLIC;
