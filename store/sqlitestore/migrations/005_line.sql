-- Ordered followers (store.AcquireParams.Wait). A follower that asks to
-- wait and is refused gets a row here, or keeps its row (and so its
-- place: id orders the line, first come first); until is when the line
-- forgets it, twice its TTL after the expiry it was told, unless it asks
-- again. A follower that acquires the lease leaves the line.
CREATE TABLE IF NOT EXISTS tenure_waiters (
    id              INTEGER PRIMARY KEY,
    name            TEXT    NOT NULL,
    holder_label    TEXT    NOT NULL,
    holder_instance TEXT    NOT NULL,
    until           INTEGER NOT NULL,
    UNIQUE (name, holder_label, holder_instance)
) STRICT;

-- The line of one lease, in order; and the forgotten followers of every
-- lease, which acquisitions and releases delete a few at a time.
CREATE INDEX IF NOT EXISTS tenure_waiters_line ON tenure_waiters (name, id);
CREATE INDEX IF NOT EXISTS tenure_waiters_until ON tenure_waiters (until);

-- What a change announces beyond the lease itself: the TTL a new tenure
-- was granted (for NoticeAcquired), and the follower a release keeps the
-- lease for until kept_until (for NoticeReleased and store.Handoff). Both
-- are valid only while line_changed equals changed: a library older than
-- this migration that shares the file changes the lease without them, and
-- its changes are announced as NoticeChanged and keep nothing.
ALTER TABLE tenure_leases ADD COLUMN ttl INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_leases ADD COLUMN kept_label TEXT NOT NULL DEFAULT '';
ALTER TABLE tenure_leases ADD COLUMN kept_instance TEXT NOT NULL DEFAULT '';
ALTER TABLE tenure_leases ADD COLUMN kept_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tenure_leases ADD COLUMN line_changed INTEGER NOT NULL DEFAULT 0;
