package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Listen implements [store.Notifier.Listen] by polling, since SQLite
// cannot push: every [Config.PollInterval] (default 25 ms) it asks, on a
// connection of its own, for PRAGMA data_version, which moves whenever
// another connection of this or any other process has committed to the
// file. Only then does it read the leases whose release or new tenure
// (takeover, or acquisition after a release) came after the last one it
// reported, in the order they happened, and call notify with each name;
// renewals commit too but announce nothing. A follower therefore hears of
// a release within about one interval instead of waiting for the expiry
// it was told.
//
// notify runs on the calling goroutine, one name at a time; the store's
// other calls never wait for it. Listen calls notify with the empty name
// when it has first read the change counter, and again if it ever finds
// the counter lower than it was (the file was replaced by an older copy):
// what changed before then is unknown (see [store.Notifier]). A failed
// poll is tried again at the next interval and loses nothing, since the
// counter in the file remembers.
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.poll)
}

// poll is the loop of [Store.Listen].
func (s *Store) poll(ctx context.Context, notify func(store.Notice)) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	var w watcher
	for {
		// data_version is per connection: only one connection's readings
		// can be compared, so the watcher keeps its own.
		if err := w.step(ctx, s.db, notify); err != nil {
			w.drop()
		}
		select {
		case <-ctx.Done():
			w.drop()
			return
		case <-t.C:
		}
	}
}

// watcher is what [Store.poll] remembers between two polls.
type watcher struct {
	conn        *sql.Conn
	versionStmt *sql.Stmt // PRAGMA data_version, prepared once per connection
	version     int64     // the connection's last PRAGMA data_version
	change      int64     // the last change counter value reported
	subscribed  bool      // change is known
}

// drop gives the connection back; the next step takes a new one.
func (w *watcher) drop() {
	if w.versionStmt != nil {
		_ = w.versionStmt.Close() // Closing a prepared statement cannot fail in a way Listen could act on.
		w.versionStmt = nil
	}
	if w.conn != nil {
		_ = w.conn.Close() // Returning it to the pool cannot fail in a way Listen could act on.
		w.conn = nil
	}
}

// step polls once and reports what changed since the last step.
func (w *watcher) step(ctx context.Context, db *sql.DB, notify func(store.Notice)) error {
	if w.conn == nil {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		w.conn = c
		w.version = -1 // a new connection's version says nothing yet
		stmt, err := c.PrepareContext(ctx, "PRAGMA data_version")
		if err != nil {
			return err
		}
		w.versionStmt = stmt
	}
	var v int64
	if err := w.versionStmt.QueryRowContext(ctx).Scan(&v); err != nil {
		return err
	}
	if v == w.version && w.subscribed {
		return nil
	}
	w.version = v
	return w.read(ctx, notify)
}

// read reports the leases stamped after the last change seen.
func (w *watcher) read(ctx context.Context, notify func(store.Notice)) error {
	var last int64
	err := w.conn.QueryRowContext(ctx, `SELECT last_change FROM tenure_counter WHERE id = 1`).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return errors.New("the token counter row is missing")
	}
	if err != nil {
		return err
	}
	if !w.subscribed || last < w.change {
		w.change, w.subscribed = last, true
		notify(store.Notice{}) // from here on nothing is missed
		return nil
	}
	if last == w.change {
		return nil
	}
	rows, err := w.conn.QueryContext(ctx,
		`SELECT name FROM tenure_leases WHERE changed > ? AND changed <= ? ORDER BY changed`, w.change, last)
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			_ = rows.Close() // The scan error is the one to report.
			return err
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	w.change = last
	for _, n := range names {
		if ctx.Err() != nil {
			return nil
		}
		notify(store.Notice{Name: n})
	}
	return nil
}
