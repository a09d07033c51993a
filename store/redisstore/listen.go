package redisstore

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/internal/reconnect"
	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

const (
	// Backoff between attempts to (re)subscribe.
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenIdle is how long a subscription may stay silent before Listen
	// pings the server; a second silence as long after the ping means the
	// connection is dead, and Listen subscribes anew.
	listenIdle = 15 * time.Second
)

// Listen implements [store.Notifier.Listen]. It subscribes to the store's
// channel ([Keys.Channel]) on a connection of its own and calls notify on
// the calling goroutine with the lease name of every release and every
// takeover of an expired lease, as the scripts publish them. When the
// connection fails, or stays silent for 15 s and does not answer a ping,
// Listen subscribes again on a new connection after a backoff growing from
// 50ms to 5s; messages published in between are lost (Redis pub/sub keeps
// nothing), so on every subscription's confirmation it calls notify with
// the empty name (see [store.Notifier]).
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, func(ctx context.Context, notify func(store.Notice)) {
		reconnect.Loop(ctx, listenBackoffMin, listenBackoffMax, func(ctx context.Context) bool {
			return s.listenOnce(ctx, notify)
		})
	})
}

// listenOnce subscribes on a new connection and delivers messages until
// the connection fails, goes silent, or ctx is done. It reports whether
// the subscription worked at all, so the caller can reset its backoff.
func (s *Store) listenOnce(ctx context.Context, notify func(store.Notice)) bool {
	ps := s.client.Subscribe(ctx, s.keys.Channel)
	// Receiving does not watch ctx; closing the subscription ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer func() {
		if stop() {
			_ = ps.Close() // The subscription is being dropped; nothing is left to report to.
		}
	}()
	worked := false
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, listenIdle)
		switch {
		case err == nil:
			worked = true
			pinged = false
			switch m := msg.(type) {
			case *redis.Message:
				notify(storekit.DecodeNotice(m.Payload))
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					notify(store.Notice{}) // subscribed; what was published before is lost
				}
			}
		case isTimeout(err) && !pinged && ctx.Err() == nil:
			if ps.Ping(ctx) != nil {
				return worked
			}
			pinged = true
		default:
			return worked
		}
	}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
