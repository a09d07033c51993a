package consulstore

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

const (
	// maxHeadWatches bounds the record watches a store keeps at once (see
	// [heads]). Each is a blocking query, so a connection to the agent
	// held open, and Consul agents limit the connections of one client
	// address (http_max_conns_per_client, 200 by default).
	maxHeadWatches = 32
	// headSweepMin is the fewest remembered places at which the store
	// looks for places whose session has certainly ended.
	headSweepMin = 64
)

// heads is what a store knows of the places it answered at the head of a
// lease's line, and the watches that learn at once when such a lease's
// holder expires.
//
// A refusal that gives a follower place 1 (see [Store.refuse]) tells the
// store that the follower is next: the one that ought to hear of an
// expiry, which Consul announces nowhere. While a [Store.Listen] call
// runs, the store keeps one blocking query on the record key of each such
// lease, at most [maxHeadWatches] at once, however many Listen calls run;
// when the record stops being locked without a release (Consul
// invalidated the holder's session, or an operator ended it), every
// Listen call delivers a [store.NoticeChanged] of the lease. Releases and
// acquisitions are not delivered from here: the announcement key carries
// them.
//
// A place is forgotten, and its watch ended, when that follower acquires
// the lease through this store, when a refusal gives it a later place, and
// when the session that keeps the place has certainly ended (twice its
// TTL after the refusal that last kept it, by the local clock: a follower
// that stops asking is forgotten by Consul by then). Forgetting only ends
// an optimisation: a follower that is not told of an expiry tries at the
// expiry it was told.
type heads struct {
	s  *Store
	mu sync.Mutex
	// places holds, per lease name, the place this store answered at the
	// head of its line.
	places  map[string]*head
	sweepAt int
	// boxes are the mailboxes of the Listen calls running; run is the
	// watches they share, nil while none runs.
	boxes map[*mailbox]struct{}
	run   *headRun
}

// head is a place at the head of a lease's line, as the refusal that gave
// it read the lease.
type head struct {
	holder store.Holder
	// index is the record's ModifyIndex and held whether it was locked,
	// when the refusal read it: a watch starts from there, so an expiry
	// between the refusal and the watch's first query is not missed.
	index uint64
	held  bool
	// until is when the session that keeps the place has certainly ended,
	// by the local clock.
	until time.Time
}

// headRun is the watches of the places, while a Listen call runs. Its
// context ends when the last Listen call returns or the store is closed.
type headRun struct {
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	watches map[string]*headWatch
}

// headWatch is one watch of a lease's record.
type headWatch struct {
	cancel context.CancelFunc
}

// mailbox holds the names whose expiry one Listen call has yet to
// deliver, each once, and wakes that call when one is added.
type mailbox struct {
	mu      sync.Mutex
	pending []string
	wake    chan struct{}
}

func newHeads(s *Store) *heads {
	return &heads{s: s, places: make(map[string]*head), sweepAt: headSweepMin, boxes: make(map[*mailbox]struct{})}
}

// placed records the place a refusal gave holder in the line of lease l,
// as the refusal read it; kept is the TTL of the session that keeps the
// place. Place 1 is remembered, and watched while a Listen call runs; a
// later place forgets holder's first place in that line.
func (h *heads) placed(holder store.Holder, l lease, place int, kept time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if place != 1 {
		h.forget(l.name, holder)
		return
	}
	now := time.Now()
	if len(h.places) >= h.sweepAt {
		h.sweep(now)
	}
	h.places[l.name] = &head{holder: holder, index: l.index, held: l.held(), until: now.Add(2 * kept)}
	h.fill()
}

// acquired records that holder acquired lease name: the acquisition took
// it out of the line.
func (h *heads) acquired(name string, holder store.Holder) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.forget(name, holder)
}

// forget forgets holder's place at the head of lease name's line, if the
// store has it, and ends its watch; h.mu is held.
func (h *heads) forget(name string, holder store.Holder) {
	if p := h.places[name]; p == nil || p.holder != holder {
		return
	}
	delete(h.places, name)
	h.stop(name)
	h.fill()
}

// stop ends the watch of lease name, if one runs; h.mu is held.
func (h *heads) stop(name string) {
	if h.run == nil {
		return
	}
	if w := h.run.watches[name]; w != nil {
		w.cancel()
		delete(h.run.watches, name)
	}
}

// sweep forgets the places whose session has certainly ended; h.mu is
// held.
func (h *heads) sweep(now time.Time) {
	for name, p := range h.places {
		if now.After(p.until) {
			delete(h.places, name)
			h.stop(name)
		}
	}
	h.sweepAt = max(headSweepMin, 2*len(h.places))
}

// fill starts a watch for each place not watched, while a Listen call
// runs, up to [maxHeadWatches]; h.mu is held.
func (h *heads) fill() {
	r := h.run
	if r == nil || r.ctx.Err() != nil || len(r.watches) >= maxHeadWatches {
		return
	}
	now := time.Now()
	for name, p := range h.places {
		if len(r.watches) >= maxHeadWatches {
			return
		}
		if r.watches[name] != nil || now.After(p.until) {
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		w := &headWatch{cancel: cancel}
		r.watches[name] = w
		index, held := p.index, p.held
		r.wg.Go(func() { h.watch(ctx, r, w, name, index, held) })
	}
}

// subscribe adds the mailbox of a Listen call that starts, and starts the
// watches if it is the only one.
func (h *heads) subscribe() *mailbox {
	box := &mailbox{wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.boxes[box] = struct{}{}
	if h.run == nil {
		ctx, cancel := context.WithCancel(h.s.gate.Context())
		h.run = &headRun{ctx: ctx, cancel: cancel, watches: make(map[string]*headWatch)}
		h.fill()
	}
	return box
}

// unsubscribe removes the mailbox of a Listen call that ends. The last
// one ends the watches and waits for them.
func (h *heads) unsubscribe(box *mailbox) {
	h.mu.Lock()
	delete(h.boxes, box)
	r := h.run
	if len(h.boxes) > 0 || r == nil {
		h.mu.Unlock()
		return
	}
	h.run = nil
	h.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// watch is the watch w of run r on the record of lease name: one blocking
// query after another, from the record's ModifyIndex index, which was
// locked if held. When a query finds the record no longer locked, and not
// released, it hands the expiry to every Listen call. It ends when its
// context does, when the place is forgotten or its session has certainly
// ended, and when the record no longer exists.
func (h *heads) watch(ctx context.Context, r *headRun, w *headWatch, name string, index uint64, held bool) {
	defer h.ended(r, w, name)
	k := h.s.keys(name)
	backoff := listenBackoffMin
	for {
		left, ok := h.left(r, w, name)
		if !ok {
			return
		}
		q := &api.QueryOptions{WaitIndex: index, WaitTime: max(min(listenWait, left), time.Millisecond)}
		pair, meta, err := h.s.client.KV().Get(k.lease, q.WithContext(ctx))
		if ctx.Err() != nil {
			return
		}
		var l lease
		if err == nil {
			l, err = parseRecord(name, k, pair)
		}
		if err != nil {
			if !pause(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, listenBackoffMax)
			continue
		}
		backoff = listenBackoffMin
		if held && !l.held() && !l.val.Released {
			h.expired(name)
		}
		if !l.exists {
			// Nothing is left to expire, and a blocking query on an absent
			// key wakes at writes to other keys: forget the place. The
			// follower's next refusal, if any, is told it again.
			h.drop(r, w, name)
			return
		}
		held = l.held()
		index = nextIndex(index, meta.LastIndex)
	}
}

// parseRecord builds lease name from its record key alone, pair (nil when
// the key does not exist); its counter and line are left out.
func parseRecord(name string, k keys, pair *api.KVPair) (lease, error) {
	if pair == nil {
		return lease{name: name}, nil
	}
	return parseLease(name, k, []*api.KVPair{pair})
}

// left returns how long the place watch w of run r keeps watching has
// left before its session has certainly ended, and false when w should
// end: it was stopped, or the place was forgotten or has ended (which
// forgets it).
func (h *heads) left(r *headRun, w *headWatch, name string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.places[name]
	if h.run != r || r.watches[name] != w || p == nil {
		return 0, false
	}
	left := time.Until(p.until)
	if left <= 0 {
		delete(h.places, name)
		return 0, false
	}
	return left, true
}

// drop forgets the place watch w of run r on lease name keeps watching,
// unless w was stopped meanwhile.
func (h *heads) drop(r *headRun, w *headWatch, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.run == r && r.watches[name] == w {
		delete(h.places, name)
	}
}

// ended records that watch w of run r on lease name returned, and starts
// a watch of a place that had none, if any waits.
func (h *heads) ended(r *headRun, w *headWatch, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.cancel()
	if r.watches[name] == w {
		delete(r.watches, name)
	}
	if h.run == r {
		h.fill()
	}
}

// expired hands the expiry of lease name to every Listen call, unless the
// place was forgotten meanwhile (its follower acquired the lease).
func (h *heads) expired(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.places[name] == nil {
		return
	}
	for box := range h.boxes {
		box.add(name)
	}
}

// add queues name, unless it is queued already, and wakes the Listen
// call.
func (b *mailbox) add(name string) {
	b.mu.Lock()
	if !slices.Contains(b.pending, name) {
		b.pending = append(b.pending, name)
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns the names queued, oldest first, and empties the queue.
func (b *mailbox) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := b.pending
	b.pending = nil
	return names
}
