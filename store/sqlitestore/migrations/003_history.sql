-- The history of every lease (store.Historian): one row when a tenure
-- starts (granted on an absent or released lease, taken-over on an expired
-- one, with the tenure it replaced) and one when it is released (released,
-- or force-released by an operator). Acquire and Release write it in their
-- own transaction; renewals write nothing. at is the host clock in UTC unix
-- nanoseconds, as everywhere in this file. Config.HistoryRetention bounds
-- how long rows are kept.
CREATE TABLE IF NOT EXISTS tenure_history (
    id                       INTEGER PRIMARY KEY,
    name                     TEXT    NOT NULL,
    kind                     TEXT    NOT NULL
        CHECK (kind IN ('granted', 'taken-over', 'released', 'force-released')),
    holder_label             TEXT    NOT NULL,
    holder_instance          TEXT    NOT NULL,
    token                    INTEGER NOT NULL,
    previous_holder_label    TEXT,
    previous_holder_instance TEXT,
    previous_token           INTEGER,
    at                       INTEGER NOT NULL
) STRICT;

-- Reads of one lease and of the whole file, newest first; the second also
-- serves the retention's deletes.
CREATE INDEX IF NOT EXISTS tenure_history_name_at ON tenure_history (name, at);
CREATE INDEX IF NOT EXISTS tenure_history_at ON tenure_history (at);
