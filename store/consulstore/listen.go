package consulstore

import (
	"context"
	"math/rand/v2"
	"sync"
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
// Expiries run no code of this store's (Consul invalidates the session),
// so no announcement tells of them. Instead, for each lease this store
// last told a follower it is first in line for ([store.HeldError].Position
// 1; see The line in the package documentation), Listen keeps one blocking
// query more, on the lease's record key, which Consul unlocks when it
// invalidates the holder's session. When that query finds the record
// unlocked without a release, Listen delivers a [store.NoticeChanged] of
// the lease (it expired, or an operator ended its session or deleted it),
// and the follower tries at once instead of at the expiry it was told.
// That is the kind etcdstore gives an expiry: the lease is free, and the
// notice claims no release ([store.NoticeReleased]) and no new tenure
// ([store.NoticeAcquired]). The query also wakes at each renewal of the
// lease (a renewal rewrites the record). It ends when the follower
// acquires the lease through this store, when a refusal gives it a later
// place, twice the TTL of the session that keeps its place after it
// last asked (when Consul has certainly forgotten a follower that
// stopped asking), or when the record is deleted. Such queries are shared
// by every Listen call of the store and number at most 32; a store first
// in line for more leases is told of some of their expiries only. Followers further back are not
// told: they hear of the head's acquisition, or else try at the expiry
// they were told. The acquisition that follows an expiry is announced.
//
// After a failed query Listen waits (100 ms, doubling to 5 s, with jitter)
// and asks again; announcements made meanwhile are delivered when it next
// succeeds, if the key still keeps them. The queries on records back off
// the same way, each on its own, and never hold up the announcements.
// After its first successful query of the announcement key it calls
// notify with the empty name: what changed before it cannot be
// told (see [store.Notifier]). When the key does not exist yet, Listen
// creates it (empty), so that its queries wait on that key alone. It
// returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.watch)
}

// watch is the loop of [Store.Listen]: it delivers, on the calling
// goroutine, what the announcement watch ([Store.announcements]) and the
// watches of the records ([heads]) find, until ctx is done.
func (s *Store) watch(ctx context.Context, notify func(store.Notice)) {
	s.watchFrom(ctx, notify, &mark{})
}

// mark is the last announcement a watch delivered (seq), when known: a
// watch that starts from a known mark delivers what came after it rather
// than the empty notice.
type mark struct {
	seq   uint64
	known bool
}

// watchFrom is watch starting from the announcement after from, which it
// moves on as it delivers; from is the watch's own until it returns.
func (s *Store) watchFrom(ctx context.Context, notify func(store.Notice), from *mark) {
	box := s.heads.subscribe()
	defer s.heads.unsubscribe(box)
	news := make(chan []store.Notice)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { s.announcements(ctx, news, from) })
	for {
		select {
		case <-ctx.Done():
			return
		case ns := <-news:
			for _, n := range ns {
				if ctx.Err() != nil {
					return
				}
				s.heard(n)
				notify(n)
			}
		case <-box.wake:
			for _, name := range box.take() {
				if ctx.Err() != nil {
					return
				}
				n := store.Notice{Name: name, Kind: store.NoticeChanged}
				s.heard(n)
				notify(n)
			}
		}
	}
}

// announcements is the watch of the announcement key: one blocking query
// after another until ctx is done, each sending what it found to out
// (after the first successful query, the empty notice first, unless from
// is known: then what came after it).
func (s *Store) announcements(ctx context.Context, out chan<- []store.Notice, from *mark) {
	var (
		index      uint64
		seq        = from.seq // the last announcement delivered
		subscribed = from.known
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
			var found []store.Notice
			if !subscribed {
				found = append(found, store.Notice{}) // the first view: what changed before it is unknown
				subscribed, seq = true, b.val.Seq
			}
			var more []store.Notice
			more, seq = news(seq, b.val)
			if found = append(found, more...); len(found) > 0 {
				select {
				case out <- found:
				case <-ctx.Done():
					return
				}
			}
			from.seq, from.known = seq, true
			index = nextIndex(index, meta.LastIndex)
			backoff = listenBackoffMin
			continue
		}
		if !pause(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// pause waits about d (between d/2 and d, at random) after a failed query,
// and reports false when ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d/2 + rand.N(d/2+1))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
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
