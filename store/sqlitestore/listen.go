package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Listen implements [store.Notifier.Listen]. It announces each release
// ([store.NoticeReleased], with the follower the lease is kept for in
// Next) and each new tenure ([store.NoticeAcquired], with its holder and
// the TTL it was granted in Remaining); renewals announce nothing.
//
// Changes come to it two ways. A change that this Store commits (any of
// its methods, from any goroutine) is offered to its listeners as soon as
// it has committed, before the Store's next write begins. Changes that
// other connections or processes commit are found by polling, since
// SQLite cannot push: every [Config.PollInterval] ([DefaultPollInterval] by default) Listen
// asks, on a connection of its own, for PRAGMA data_version, which moves
// whenever another connection has committed to the file. Only then does
// it read the leases whose release or new tenure came after the last
// change it read, in the order they happened; when another Store changed
// a lease more than once between two polls, only its latest change is
// announced. Each change is announced once, whichever way came first, and
// never after a later change of the same lease.
//
// notify runs on the calling goroutine, one notice at a time; the store's
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

// stamped is a notice with the value of the change counter its change
// took.
type stamped struct {
	change int64
	notice store.Notice
}

// listener is one [Store.Listen] call: the notices queued for its
// goroutine, and what it has queued, so that a change that both this
// Store's commit and a poll report is announced once and never after a
// later change of the same lease.
type listener struct {
	wake chan struct{} // buffered; signalled without blocking

	mu    sync.Mutex
	queue []store.Notice
	// read is the change counter value the polls have read up to: every
	// change up to it was queued, or superseded by a later change of its
	// lease that was.
	read int64
	// latest holds, per lease, the greatest change after read that was
	// queued.
	latest map[string]int64
}

// offerLocked queues c unless it or a later change of its lease was
// queued. l.mu must be held.
func (l *listener) offerLocked(c stamped) bool {
	if c.change <= l.read || l.latest[c.notice.Name] >= c.change {
		return false
	}
	l.latest[c.notice.Name] = c.change
	l.queue = append(l.queue, c.notice)
	return true
}

// signal wakes the listener's goroutine.
func (l *listener) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// offer queues the notices a commit of this Store announced for every
// listener of this Store.
func (s *Store) offer(notices []stamped) {
	if len(notices) == 0 {
		return
	}
	s.listenersMu.Lock()
	defer s.listenersMu.Unlock()
	for l := range s.listeners {
		if l.offer(notices) {
			l.signal()
		}
	}
}

// offer queues those of notices that were not queued already and whose
// lease has no later change queued, and reports whether it queued any.
func (l *listener) offer(notices []stamped) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	queued := false
	for _, c := range notices {
		queued = l.offerLocked(c) || queued
	}
	return queued
}

// poll is the loop of [Store.Listen].
func (s *Store) poll(ctx context.Context, notify func(store.Notice)) {
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	l := &listener{wake: make(chan struct{}, 1), latest: make(map[string]int64)}
	defer func() {
		s.listenersMu.Lock()
		delete(s.listeners, l)
		s.listenersMu.Unlock()
	}()
	var w watcher
	defer w.drop()
	due := true
	for {
		// data_version is per connection: only one connection's readings
		// can be compared, so the watcher keeps its own.
		if due {
			if err := w.step(ctx, s, l); err != nil {
				w.drop()
			}
		}
		if !l.deliver(ctx, notify) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			due = true
		case <-l.wake:
			due = false
		}
	}
}

// deliver calls notify with every queued notice, in order, and reports
// whether ctx is still live.
func (l *listener) deliver(ctx context.Context, notify func(store.Notice)) bool {
	l.mu.Lock()
	notices := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, n := range notices {
		if ctx.Err() != nil {
			return false
		}
		notify(n)
	}
	return ctx.Err() == nil
}

// watcher is the connection a [Store.poll] reads on, and what it
// remembers of it between two polls.
type watcher struct {
	conn        *sql.Conn
	versionStmt *sql.Stmt // PRAGMA data_version, prepared once per connection
	version     int64     // the connection's last PRAGMA data_version
	subscribed  bool      // the listener's read is known
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

// step polls once and queues for l what changed since the last step.
func (w *watcher) step(ctx context.Context, s *Store, l *listener) error {
	if w.conn == nil {
		c, err := s.db.Conn(ctx)
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
	return w.read(ctx, s, l)
}

// read queues for l the changes stamped after the last one it read.
func (w *watcher) read(ctx context.Context, s *Store, l *listener) error {
	var last int64
	err := w.conn.QueryRowContext(ctx, `SELECT last_change FROM tenure_counter WHERE id = 1`).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return errors.New("the token counter row is missing")
	}
	if err != nil {
		return err
	}
	l.mu.Lock()
	read := l.read
	l.mu.Unlock()
	if !w.subscribed || last < read {
		l.mu.Lock()
		l.read = last
		clear(l.latest)
		l.queue = append(l.queue, store.Notice{}) // from here on nothing is missed
		l.mu.Unlock()
		if !w.subscribed {
			w.subscribed = true
			s.listenersMu.Lock()
			s.listeners[l] = struct{}{}
			s.listenersMu.Unlock()
		}
		return nil
	}
	if last == read {
		return nil
	}
	rows, err := w.conn.QueryContext(ctx,
		`SELECT name, `+leaseColumns+` FROM tenure_leases WHERE changed > ? AND changed <= ? ORDER BY changed`, read, last)
	if err != nil {
		return err
	}
	var changes []stamped
	for rows.Next() {
		r, err := scanNamed(rows)
		if err != nil {
			_ = rows.Close() // The scan error is the one to report.
			return err
		}
		changes = append(changes, stamped{change: r.changed, notice: r.notice(r.name)})
	}
	if err := rows.Err(); err != nil {
		return err
	}
	l.polled(changes, last)
	return nil
}

// polled queues the changes a poll read, those up to last, unless they
// were queued already or a later change of their lease was.
func (l *listener) polled(changes []stamped, last int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range changes {
		l.offerLocked(c)
	}
	l.read = last
	for name, change := range l.latest {
		if change <= last {
			delete(l.latest, name)
		}
	}
}
