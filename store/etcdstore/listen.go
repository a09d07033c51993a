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

// Listen implements [store.Notifier.Listen] with two etcd watches, which
// see neither renewals (puts of held/ keys) nor the line (wait/ keys):
//
//   - the puts under announce/, which only [Store.Acquire] and
//     [Store.Release] write, each in the transaction that makes the
//     change: notify hears of every new tenure (NoticeAcquired, with its
//     holder and granted TTL) and every release (NoticeReleased, naming
//     the head of the line in Next);
//   - the deletions under claim/ and held/: a release deletes both keys of
//     its lease in one revision, while etcd expiring a lease deletes its
//     held/ key alone. notify hears of each such lone deletion at once as
//     [store.NoticeChanged]: the store cannot name the head of the line
//     without reading it, so every follower of the lease may try.
//
// A listener's cost so grows with handovers and expiries only. notify runs
// on the calling goroutine.
//
// The watches require a leader: when the member the client talks to loses
// its leader, or either watch ends for any other reason, Listen watches
// again, each watch from the revision after the last event it delivered,
// after a pause of 100 ms doubling up to 5 s. If that revision was
// compacted meanwhile, the events in between are lost and that watch goes
// on from the current revision. Each time a watch starts from the current
// revision (at first, and after such a loss) Listen calls notify with the
// empty name once both watches are in place (see [store.Notifier]).
//
// Listen returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.watch)
}

// watched is one of a listener's watches: a key range, the events it
// filters out, and where to watch from.
type watched struct {
	key, end string
	filter   clientv3.OpOption
	next     int64 // the revision to watch from; 0: the current one
	ch       clientv3.WatchChan
}

// open starts the watch. A watch from the current revision misses what
// came before it; one from the revision after the last event delivered
// misses nothing.
func (w *watched) open(ctx context.Context, client *clientv3.Client) {
	opts := []clientv3.OpOption{clientv3.WithRange(w.end), w.filter, clientv3.WithCreatedNotify()}
	if w.next != 0 {
		opts = append(opts, clientv3.WithRev(w.next))
	}
	w.ch = client.Watch(ctx, w.key, opts...)
}

// took notes what resp delivered, and reports whether the watch goes on:
// after an error its channel closes next.
func (w *watched) took(resp clientv3.WatchResponse) bool {
	if resp.CompactRevision > 0 {
		w.next = 0
	}
	if resp.Err() != nil {
		return false
	}
	if n := len(resp.Events); n > 0 {
		w.next = resp.Events[n-1].Kv.ModRevision + 1
	}
	return true
}

// watch is the loop of [Store.Listen]: both watches, again and again,
// until ctx is done.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) {
	announcements := &watched{
		key:    s.prefix + announceDir,
		end:    clientv3.GetPrefixRangeEnd(s.prefix + announceDir),
		filter: clientv3.WithFilterDelete(),
	}
	// claim/ sorts right before held/: nothing this store writes lies
	// between them, so one range holds both.
	deletions := &watched{
		key:    s.prefix + claimDir,
		end:    clientv3.GetPrefixRangeEnd(s.prefix + heldDir),
		filter: clientv3.WithFilterPut(),
	}
	delay := minRewatchDelay
	for {
		if s.follow(ctx, announcements, deletions, notify) {
			delay = minRewatchDelay
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

// follow runs both watches, on one gRPC stream, until either ends or ctx
// is done, and reports whether the server answered at all.
func (s *Store) follow(ctx context.Context, announcements, deletions *watched, notify func(store.Notice)) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	fresh := announcements.next == 0 || deletions.next == 0
	announcements.open(wctx, s.client)
	deletions.open(wctx, s.client)
	answered, created := false, 0
	for {
		var resp clientv3.WatchResponse
		var ok bool
		w := announcements
		select {
		case resp, ok = <-announcements.ch:
		case resp, ok = <-deletions.ch:
			w = deletions
		}
		if !ok || !w.took(resp) {
			return answered
		}
		answered = true
		if resp.Created {
			if created++; created == 2 && fresh {
				notify(store.Notice{})
			}
		}
		if w == announcements {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					notify(announced(strings.TrimPrefix(string(ev.Kv.Key), announcements.key), ev.Kv.Value))
				}
			}
		} else {
			s.expired(resp.Events, notify)
		}
	}
}

// expired calls notify for each lease whose held/ key events show deleted
// without its claim/ key in the same revision: etcd expired it. A release
// deletes both in one transaction, and one watch response carries every
// event of a revision.
func (s *Store) expired(events []*clientv3.Event, notify func(store.Notice)) {
	held, claim := s.prefix+heldDir, s.prefix+claimDir
	for i := 0; i < len(events); {
		rev := events[i].Kv.ModRevision
		j := i
		var released map[string]bool
		for ; j < len(events) && events[j].Kv.ModRevision == rev; j++ {
			if name, ok := strings.CutPrefix(string(events[j].Kv.Key), claim); ok {
				if released == nil {
					released = make(map[string]bool)
				}
				released[name] = true
			}
		}
		for _, ev := range events[i:j] {
			if name, ok := strings.CutPrefix(string(ev.Kv.Key), held); ok && ev.Type == clientv3.EventTypeDelete && !released[name] {
				notify(store.Notice{Name: name, Kind: store.NoticeChanged})
			}
		}
		i = j
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
