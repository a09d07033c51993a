package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/reconnect"
	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var _ store.Subscriber = (*Store)(nil)

// Backoff between attempts to (re)establish the listening connection.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenCloseTimeout bounds closing a listening connection whose
	// context is already done.
	listenCloseTimeout = 5 * time.Second
)

// Listen implements [store.Notifier.Listen]; notify runs on the calling
// goroutine with a [store.Notice] for every release (naming the follower
// the lease is kept for) and acquisition (with its holder and TTL); a
// batch announces its acquisitions in few notifications, each a JSON
// array of them.
//
// Every Listen call of one Store shares one listening connection: the
// first takes one connection out of the pool for itself (the pool opens
// another in its place) and runs LISTEN on the store's channel
// ([Objects.Channel]); the last to return closes it. Clients that share a
// Store so cost the server one listener per process. When the connection
// fails it is dropped and a new one is made, after a backoff growing from
// 50ms to 5s; notifications sent in between are lost, so after every
// LISTEN every caller's notify gets the empty name (see [store.Notifier]),
// as does a caller that falls a thousand notices behind.
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.hub.Listen)
}

// Subscribe implements [store.Subscriber]: the subscription's Listen is
// [Store.Listen] for the names it follows, over the same shared
// connection, which hands each notification only to the listeners that
// follow its name (and to those of [Store.Listen], which follow every
// name).
func (s *Store) Subscribe() store.Subscription {
	return subscription{gate: s.gate, Subscription: s.hub.Subscribe()}
}

// subscription runs a hub's subscription behind the store's closed gate.
type subscription struct {
	gate *storekit.Gate
	*storekit.Subscription
}

func (s subscription) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.Subscription.Listen)
}

// listenLoop is the shared loop behind every Listen call: one listening
// connection at a time, remade with backoff when it fails.
func (s *Store) listenLoop(ctx context.Context, notify func(store.Notice)) {
	reconnect.Loop(ctx, listenBackoffMin, listenBackoffMax, func(ctx context.Context) bool {
		return s.listenOnce(ctx, notify)
	})
}

// listenOnce takes a connection, listens and delivers notifications until
// the connection or ctx fails. It reports whether LISTEN succeeded, so the
// caller can reset its backoff.
func (s *Store) listenOnce(ctx context.Context, notify func(store.Notice)) bool {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return false
	}
	conn := pc.Hijack()
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listenCloseTimeout)
		defer cancel()
		_ = conn.Close(closeCtx) // The connection is being dropped; nothing is left to report to.
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.obj.Channel}.Sanitize()); err != nil {
		return false
	}
	notify(store.Notice{}) // subscribed; what was announced before this LISTEN is lost
	s.hookMu.Lock()
	hook := s.listenHook
	s.hookMu.Unlock()
	if hook != nil {
		hook(conn.PgConn().PID())
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		for _, notice := range storekit.DecodeNotices(n.Payload) {
			notify(notice)
		}
	}
}
