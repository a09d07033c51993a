package pgstore

import (
	"context"
	"errors"
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
// With [Config.ListenConfig] the listening connection is made with it
// instead. Without it, Listen refuses at once (with a [*PoolerError]) a
// pool whose connections go through a connection pooler, where a LISTEN
// is lost when the pooler hands the session to another client; a
// listening connection that turns out to go through one is dropped
// before its LISTEN, and made again with backoff. With
// [Config.NoListen] Listen refuses at once.
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.listen(ctx, notify, s.hub.Listen)
}

// listen refuses what Config rules out, then runs loop behind the store's
// closed gate.
func (s *Store) listen(ctx context.Context, notify func(store.Notice), loop func(context.Context, func(store.Notice))) error {
	if notify != nil && s.gate.Check("listen") == nil {
		if err := s.listenRefusal(ctx); err != nil {
			return err
		}
	}
	return s.gate.Listen(ctx, notify, loop)
}

// listenRefusal returns why Listen must not run: Config.NoListen, or a
// pool that goes through a pooler without Config.ListenConfig. An error
// asking the pool (a server down) is no refusal: the loop retries.
func (s *Store) listenRefusal(ctx context.Context) error {
	switch {
	case s.noListen:
		return errNoListen
	case s.listenConfig != nil:
		return nil
	}
	err := s.pooledListen(ctx)
	if _, ok := errors.AsType[*PoolerError](err); ok {
		return err
	}
	return nil
}

// Subscribe implements [store.Subscriber]: the subscription's Listen is
// [Store.Listen] for the names it follows, over the same shared
// connection, which hands each notification only to the listeners that
// follow its name (and to those of [Store.Listen], which follow every
// name).
func (s *Store) Subscribe() store.Subscription {
	return subscription{store: s, Subscription: s.hub.Subscribe()}
}

// subscription runs a hub's subscription as [Store.Listen] runs the hub.
type subscription struct {
	store *Store
	*storekit.Subscription
}

func (s subscription) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.store.listen(ctx, notify, s.Subscription.Listen)
}

// listenLoop is the shared loop behind every Listen call: one listening
// connection at a time, remade with backoff when it fails.
func (s *Store) listenLoop(ctx context.Context, notify func(store.Notice)) {
	reconnect.Loop(ctx, listenBackoffMin, listenBackoffMax, func(ctx context.Context) bool {
		return s.listenOnce(ctx, notify)
	})
}

// listenConn makes a connection with Config.ListenConfig, or takes one
// out of the pool for good.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	if s.listenConfig != nil {
		return pgx.ConnectConfig(ctx, s.listenConfig)
	}
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return pc.Hijack(), nil
}

// listenOnce takes a connection, listens and delivers notifications until
// the connection or ctx fails. It reports whether LISTEN succeeded, so the
// caller can reset its backoff.
func (s *Store) listenOnce(ctx context.Context, notify func(store.Notice)) bool {
	conn, err := s.listenConn(ctx)
	if err != nil {
		return false
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), listenCloseTimeout)
		defer cancel()
		_ = conn.Close(closeCtx) // The connection is being dropped; nothing is left to report to.
	}()
	if s.listenConfig == nil {
		client, server, err := backendPIDs(ctx, conn)
		if err != nil || client != server {
			return false // through a pooler a LISTEN would be lost
		}
	}
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
