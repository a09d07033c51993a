package etcdstore

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

// Bounds of the pause between two watches when one ends with an error.
const (
	minRewatchDelay = 100 * time.Millisecond
	maxRewatchDelay = 5 * time.Second
)

// Listen implements [store.Notifier.Listen] with one etcd watch on the
// puts under announce/, which only [Store.Acquire] and [Store.Release]
// write, each in the transaction that makes the change: notify hears of
// every new tenure (NoticeAcquired, with its holder and granted TTL) and
// every release (NoticeReleased, naming the head of the line in Next).
// Renewals, the line and etcd expiring a lease write nothing there, so a
// listener's cost grows with handovers only. An expiry is not announced
// by itself: the takeover that follows it is. notify runs on the calling
// goroutine.
//
// The watch requires a leader: when the member the client talks to loses
// its leader, or the watch ends for any other reason, Listen watches again
// from the revision after the last event it delivered, after a pause of
// 100 ms doubling up to 5 s. If that revision was compacted meanwhile, the
// events in between are lost and Listen goes on from the current revision.
// Each time it watches from the current revision (at first, and after such
// a loss) it calls notify with the empty name (see [store.Notifier]).
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.watch)
}

// watch is the loop of [Store.Listen]: one watch after another until ctx
// is done.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) {
	prefix := s.prefix + announceDir
	var next int64 // the revision to watch from; 0: the current one
	delay := minRewatchDelay
	for {
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify()}
		// A watch from the current revision misses what came before it;
		// one from the revision after the last event delivered misses
		// nothing.
		fresh := next == 0
		if !fresh {
			opts = append(opts, clientv3.WithRev(next))
		}
		for resp := range s.client.Watch(clientv3.WithRequireLeader(ctx), prefix, opts...) {
			if resp.CompactRevision > 0 {
				next = 0
			}
			if resp.Err() != nil {
				continue // the channel closes next
			}
			if resp.Created && fresh {
				notify(store.Notice{})
			}
			delay = minRewatchDelay
			for _, ev := range resp.Events {
				next = ev.Kv.ModRevision + 1
				if ev.Type == clientv3.EventTypePut {
					notify(announced(strings.TrimPrefix(string(ev.Kv.Key), prefix), ev.Kv.Value))
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		timer := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		delay = min(2*delay, maxRewatchDelay)
	}
}

// announced reads the announcement put under announce/name. One this store
// did not write announces that the lease changed, without saying how.
func announced(name string, value []byte) store.Notice {
	if n := storekit.DecodeNotice(string(value)); n.Name == name {
		return n
	}
	return store.Notice{Name: name}
}
