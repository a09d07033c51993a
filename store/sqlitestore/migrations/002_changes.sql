-- Release and takeover announcements for Listen. SQLite cannot push them,
-- so every new tenure and every release takes the next value of a change
-- counter (kept in the counter row, never deleted) and stamps it on the
-- lease; a listener polls PRAGMA data_version and reads the leases whose
-- stamp passed the last one it saw. Renewals change neither.
ALTER TABLE tenure_counter ADD COLUMN last_change INTEGER NOT NULL DEFAULT 0 CHECK (last_change >= 0);

ALTER TABLE tenure_leases ADD COLUMN changed INTEGER NOT NULL DEFAULT 0;

CREATE INDEX IF NOT EXISTS tenure_leases_changed ON tenure_leases (changed);
