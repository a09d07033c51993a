package consulstore

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

const (
	// listenWait is how long one blocking query waits for a change.
	listenWait = time.Minute
	// listenBackoffMin and listenBackoffMax bound the wait between
	// attempts after a failed query.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen implements [store.Notifier.Listen] with blocking queries on the
// key prefix. It reports the name of each lease that was released, that
// expired (its session was invalidated) or that began a new tenure (a
// takeover, or an acquisition after a release), found by comparing what
// each query returns with what the previous one did. notify runs on the
// calling goroutine, one name at a time.
//
// Every change under the prefix ends a blocking query, renewals included,
// so each listener reads the whole prefix once per change. After a failed
// query Listen waits (100 ms, doubling to 5 s, with jitter) and asks again;
// changes made meanwhile are reported when it next succeeds. After its
// first successful query it calls notify with the empty name: what changed
// before it cannot be told (see [store.Notifier]). It returns
// ctx's error when ctx is done and an error matching [store.ErrClosed]
// when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.watch)
}

// watch is the loop of [Store.Listen]: one blocking query after another
// until ctx is done.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) {
	var (
		index   uint64
		seen    map[string]snapshot // nil until the first query succeeds
		backoff = listenBackoffMin
	)
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: listenWait}
		pairs, meta, err := s.client.KV().List(s.cfg.KeyPrefix, q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			var leases map[string]lease
			leases, err = s.parseTree(pairs)
			if err == nil {
				now := snapshots(leases)
				if seen == nil {
					notify(store.Notice{}) // the first view: what changed before it is unknown
				}
				for name := range changed(seen, now) {
					if ctx.Err() != nil {
						break
					}
					notify(store.Notice{Name: name})
				}
				seen = now
				index = nextIndex(index, meta.LastIndex)
				backoff = listenBackoffMin
				continue
			}
		}
		timer := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// snapshot is what Listen compares of one lease between two queries.
type snapshot struct {
	token    store.Token
	held     bool
	released bool
}

func snapshots(leases map[string]lease) map[string]snapshot {
	out := make(map[string]snapshot, len(leases))
	for name, l := range leases {
		if l.exists {
			out[name] = snapshot{token: l.token, held: l.held(), released: l.val.Released}
		}
	}
	return out
}

// changed yields the names whose lease was released, expired, began a new
// tenure or disappeared between before and after.
func changed(before, after map[string]snapshot) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for name, b := range before {
			a, ok := after[name]
			switch {
			case !ok, // deleted
				a.token != b.token,        // a new tenure
				a.released && !b.released, // released
				b.held && !a.held:         // released or expired
				if !yield(name) {
					return
				}
			}
		}
	}
}

// nextIndex is the index of the next blocking query after one that
// returned index got: it starts again from 0 when the index went backwards
// (a snapshot restore or a new leader) and never waits on 0 after the
// first query, which would return at once.
func nextIndex(prev, got uint64) uint64 {
	switch {
	case got < prev:
		return 0
	case got == 0:
		return 1
	}
	return got
}
