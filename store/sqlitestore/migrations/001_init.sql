-- The token counter: one row, created here and never deleted or lowered, so
-- every new tenure of every lease gets a token greater than all before it,
-- across releases and deleted lease rows (promise P2).
CREATE TABLE IF NOT EXISTS tenure_counter (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_token INTEGER NOT NULL CHECK (last_token >= 0)
) STRICT;

INSERT OR IGNORE INTO tenure_counter (id, last_token) VALUES (1, 0);

CREATE TRIGGER IF NOT EXISTS tenure_counter_keep
BEFORE DELETE ON tenure_counter
BEGIN
    SELECT RAISE(ABORT, 'tenure: the token counter row must never be deleted');
END;

CREATE TRIGGER IF NOT EXISTS tenure_counter_up
BEFORE UPDATE ON tenure_counter
WHEN NEW.last_token < OLD.last_token OR NEW.id <> OLD.id
BEGIN
    SELECT RAISE(ABORT, 'tenure: the token counter must never go down');
END;

-- One row per lease name. Times are UTC unix nanoseconds read from the host
-- clock inside the write transaction. A released lease keeps its row, with
-- expires_at set to the moment of release and released = 1.
CREATE TABLE IF NOT EXISTS tenure_leases (
    name            TEXT    PRIMARY KEY,
    holder_label    TEXT    NOT NULL,
    holder_instance TEXT    NOT NULL,
    token           INTEGER NOT NULL CHECK (token > 0),
    seq             INTEGER NOT NULL CHECK (seq > 0),
    acquired_at     INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    released        INTEGER NOT NULL DEFAULT 0 CHECK (released IN (0, 1))
) STRICT, WITHOUT ROWID;

-- The fence: the highest token each resource accepted. See Fence.
CREATE TABLE IF NOT EXISTS tenure_fence (
    resource TEXT    PRIMARY KEY,
    token    INTEGER NOT NULL CHECK (token > 0)
) STRICT, WITHOUT ROWID;
