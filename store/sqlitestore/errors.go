package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// classify is the one place where errors of SQLite, database/sql and the
// context become the store's errors. op names the call; errors already
// carrying a tenure sentinel pass through with op prepended.
func (s *Store) classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var held *store.HeldError
	if errors.As(err, &held) {
		return err
	}
	if s.gate.Closed() {
		// Close raced with the call; whatever broke, the store is closed.
		return fmt.Errorf("sqlitestore: %s: %w: %w", op, store.ErrClosed, err)
	}
	return classifyErr(op, s.path, s.cfg.BusyTimeout, err)
}

// classifyErr maps err for the operation op on the database file at path
// (empty when unknown, as in [Fence]) with the busy timeout busy (zero when
// unknown).
func classifyErr(what, path string, busy time.Duration, err error) error {
	for _, sentinel := range []error{
		store.ErrInvalid, store.ErrNotHeld, store.ErrNotFound, store.ErrFenced,
		store.ErrUnavailable, store.ErrClosed, store.ErrNotMigrated,
	} {
		if errors.Is(err, sentinel) {
			return fmt.Errorf("sqlitestore: %s: %w", what, err)
		}
	}
	file := "the database file"
	if path != "" {
		file = fmt.Sprintf("database file %q", path)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sqlitestore: %s: %w: the call's context ended before %s answered; the call may have been applied: %w",
			what, store.ErrUnavailable, file, err)
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) {
		return fmt.Errorf("sqlitestore: %s: %w: the connection to %s broke; the call may have been applied, retry: %w",
			what, store.ErrUnavailable, file, err)
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("sqlitestore: %s: %w", what, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		timeout := "the busy timeout"
		if busy > 0 {
			timeout = fmt.Sprintf("the busy timeout (%s)", busy)
		}
		return fmt.Errorf("sqlitestore: %s: %w: %s stayed locked by another connection or process for longer than %s; retry, shorten the other side's transactions or raise Config.BusyTimeout: %w",
			what, store.ErrUnavailable, file, timeout, err)
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("sqlitestore: %s: %s is not a SQLite database (or is encrypted); point the store at another path, or move that file away if it is not yours to keep: %w",
			what, file, err)
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_AUTH:
		return fmt.Errorf("sqlitestore: %s: cannot write %s or its -wal and -shm companions: make the file and its directory writable by this user, or choose another path: %w",
			what, file, err)
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("sqlitestore: %s: %s is corrupt; stop every process using it and move it away. A new file restarts the token counter, so resources fenced elsewhere will refuse the new, lower tokens until their fences are reset: %w",
			what, file, err)
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PROTOCOL:
		return fmt.Errorf("sqlitestore: %s: %w: %s could not be read or written (disk full or I/O error); free space or fix the disk, then retry: %w",
			what, store.ErrUnavailable, file, err)
	case sqlite3.SQLITE_ERROR:
		if strings.Contains(se.Error(), "no such table") || strings.Contains(se.Error(), "no such column") {
			return fmt.Errorf("sqlitestore: %s: %w: %s lacks the tenure tables; open it with sqlitestore.Open (which migrates it) before using it: %w",
				what, store.ErrNotMigrated, file, err)
		}
	}
	return fmt.Errorf("sqlitestore: %s: %w", what, err)
}
