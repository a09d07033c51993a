package consulstore

import (
	"context"
	"sync"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

var _ store.Subscriber = (*Store)(nil)

// Subscribe implements [store.Subscriber]. A subscription's Listen call
// runs [Store.Listen]'s watch only while it follows a lease this store
// does not hold (by its own last write, which a renewal refreshes): a
// follower waiting for a lease hears every announcement of the prefix,
// and the releases of the leases it holds too, as a listener of every
// name does; a store that only holds what it follows makes no request to
// listen at all, so an idle holder's requests are its renewals. A holder
// then learns that an operator released its lease, or someone took it
// over, from its next renewal rather than at once. It hands on the empty
// notice when Listen begins, and the notices of the names it follows:
// its watch, whenever it starts, delivers what was announced since the
// previous one stopped (since Listen began, the first time), or the empty
// notice when more came than the announcement key keeps.
func (s *Store) Subscribe() store.Subscription {
	return &subscription{s: s, names: make(map[string]struct{}), changed: make(chan struct{})}
}

type subscription struct {
	s       *Store
	mu      sync.Mutex
	names   map[string]struct{}
	changed chan struct{} // closed, and replaced, by Follow and Unfollow
}

func (sub *subscription) Follow(name string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if _, ok := sub.names[name]; !ok {
		sub.names[name] = struct{}{}
		close(sub.changed)
		sub.changed = make(chan struct{})
	}
}

func (sub *subscription) Unfollow(name string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if _, ok := sub.names[name]; ok {
		delete(sub.names, name)
		close(sub.changed)
		sub.changed = make(chan struct{})
	}
}

// waiting reports whether sub follows a lease its store does not hold,
// with channels closed when that may have changed.
func (sub *subscription) waiting() (bool, <-chan struct{}, <-chan struct{}) {
	held := sub.s.memo.changes() // first, so that a change after the look below closes it
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for name := range sub.names {
		if !sub.s.memo.holds(name) {
			return true, sub.changed, held
		}
	}
	return false, sub.changed, held
}

func (sub *subscription) follows(name string) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	_, ok := sub.names[name]
	return ok
}

// Listen is [store.Subscription.Listen]: see [Store.Subscribe].
func (sub *subscription) Listen(ctx context.Context, notify func(store.Notice)) error {
	return sub.s.gate.Listen(ctx, notify, func(ctx context.Context, notify func(store.Notice)) {
		filtered := func(n store.Notice) {
			if n.Name == "" || sub.follows(n.Name) {
				notify(n)
			}
		}
		// Subscribed: the watch, whenever it runs, starts from the
		// announcement board as it is now (one read), so that what is
		// announced after this notice reaches it (eight at most; more,
		// and it reports the empty notice again).
		from := sub.s.boardMark(ctx)
		notify(store.Notice{})
		for ctx.Err() == nil {
			on, followed, held := sub.waiting()
			if !on {
				select {
				case <-ctx.Done():
				case <-followed:
				case <-held:
				}
				continue
			}
			sub.watchWhileWaiting(ctx, filtered, from)
		}
	})
}

// watchWhileWaiting runs the store's watch until ctx ends or sub no
// longer waits for any lease.
func (sub *subscription) watchWhileWaiting(ctx context.Context, notify func(store.Notice), from *mark) {
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	wg.Go(func() { sub.s.watchFrom(wctx, notify, from) })
	for {
		on, followed, held := sub.waiting()
		if !on {
			return
		}
		select {
		case <-wctx.Done():
			return
		case <-followed:
		case <-held:
		}
	}
}

// boardMark reads the announcement board once and returns its count as a
// known mark; an unknown one when the read fails (a watch from it then
// starts with the empty notice).
func (s *Store) boardMark(ctx context.Context) *mark {
	pair, _, err := s.client.KV().Get(s.announceKey(), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return &mark{}
	}
	b, err := parseBoard(pair)
	if err != nil {
		return &mark{}
	}
	return &mark{seq: b.val.Seq, known: true}
}
