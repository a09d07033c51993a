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

// Listen implements [store.Notifier.Listen] with blocking queries on one
// key, the announcement key <prefix>.announce, which every acquisition and
// release rewrites in the transaction that makes the change: the number of
// announcements so far and the latest eight. Listen delivers each new one
// as a [store.NoticeReleased] (Next, the head of the line) or a
// [store.NoticeAcquired] (Holder, and Remaining the session TTL granted);
// one written by an older version of this store as a
// [store.NoticeChanged]. When more came than the key keeps
// since it last looked, or the count went backwards (the key deleted, the
// cluster restored), it first delivers the empty notice: look at
// everything again. A query costs the same however many leases live under
// the prefix, and renewals do not wake it. notify runs on the calling
// goroutine, one notice at a time.
//
// Expiries are not announced: Consul invalidating a session runs no code
// of this store's. A follower tries again at the expiry it was told; the
// acquisition that follows an expiry is announced.
//
// After a failed query Listen waits (100 ms, doubling to 5 s, with jitter)
// and asks again; announcements made meanwhile are delivered when it next
// succeeds, if the key still keeps them. After its first successful query
// it calls notify with the empty name: what changed before it cannot be
// told (see [store.Notifier]). When the key does not exist yet, Listen
// creates it (empty), so that its queries wait on that key alone. It
// returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.watch)
}

// watch is the loop of [Store.Listen]: one blocking query after another
// until ctx is done.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) {
	var (
		index      uint64
		seq        uint64 // the last announcement delivered
		subscribed bool
		backoff    = listenBackoffMin
		key        = s.announceKey()
	)
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: listenWait}
		pair, meta, err := s.client.KV().Get(key, q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		var b board
		if err == nil {
			b, err = parseBoard(pair)
		}
		if err == nil && pair == nil {
			err = s.plantBoard(ctx, key)
		}
		if err == nil {
			if !subscribed {
				notify(store.Notice{}) // the first view: what changed before it is unknown
				subscribed, seq = true, b.val.Seq
			}
			var out []store.Notice
			out, seq = news(seq, b.val)
			for _, n := range out {
				if ctx.Err() != nil {
					break
				}
				notify(n)
			}
			index = nextIndex(index, meta.LastIndex)
			backoff = listenBackoffMin
			continue
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

// plantBoard creates the announcement key, empty, unless it exists: a
// blocking query on an absent key wakes at every write to the KV store.
func (s *Store) plantBoard(ctx context.Context, key string) error {
	_, _, err := s.client.KV().CAS(&api.KVPair{Key: key, Value: []byte(`{"seq":0}`)}, (&api.WriteOptions{}).WithContext(ctx))
	return err
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
