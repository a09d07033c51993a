package storekit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/tenure-dev/tenure/store"
)

// hubQueue is how many notices a listener may fall behind the shared loop
// before it is told that it missed some.
const hubQueue = 1024

// Hub shares one backend listener (a LISTEN connection, a subscription)
// among every [store.Notifier.Listen] call of a store, so that a process
// whose clients share a store holds one listener however many clients it
// runs. The shared loop starts with the first call and stops when the last
// one returns.
//
// A listener follows every name ([Hub.Listen]) or only the names of its
// subscription ([Hub.Subscribe]). The hub indexes subscriptions by name,
// so a notice costs it the listeners that follow its name (and those that
// follow every name), however many listen; the empty notice goes to every
// listener.
type Hub struct {
	// run is the backend's loop: it delivers notices until its context
	// ends, and the empty notice after each (re)subscription.
	run func(ctx context.Context, notify func(store.Notice))

	mu         sync.Mutex
	subs       map[*hubListener]struct{} // every listener
	all        map[*hubListener]struct{} // the listeners that follow every name
	byName     map[string][]*hubListener // the listeners of subscriptions, by the names they follow
	subscribed bool                      // the shared loop is subscribed: a new listener misses nothing from now on
	stop       context.CancelFunc
	done       chan struct{} // closed when the shared loop has returned
}

// hubListener is one Listen call's queue.
type hubListener struct {
	sub   *Subscription // nil: the listener follows every name
	queue chan store.Notice
	lost  atomic.Bool // the queue overflowed: notices were dropped
}

// Subscription is a [store.Subscription] of a [Hub], but for its Listen,
// which returns no error: the store runs it behind its [Gate].
type Subscription struct {
	h         *Hub
	names     map[string]struct{} // guarded by h.mu
	listeners []*hubListener      // its Listen calls running; guarded by h.mu
}

// NewHub returns a hub around the backend loop run.
func NewHub(run func(ctx context.Context, notify func(store.Notice))) *Hub {
	return &Hub{
		run:    run,
		subs:   make(map[*hubListener]struct{}),
		all:    make(map[*hubListener]struct{}),
		byName: make(map[string][]*hubListener),
	}
}

// Listen delivers the shared loop's notices to notify, on the calling
// goroutine and in order, until ctx is done. It reports a subscription
// with the empty notice, as the contract asks: at once when the shared
// loop is already subscribed, else when it subscribes. A listener that
// falls more than a thousand notices behind gets the empty notice in place
// of those it missed.
func (h *Hub) Listen(ctx context.Context, notify func(store.Notice)) {
	h.listen(ctx, &hubListener{}, notify)
}

// Subscribe returns a subscription of h that follows no name yet.
func (h *Hub) Subscribe() *Subscription {
	return &Subscription{h: h, names: make(map[string]struct{})}
}

// Listen is [Hub.Listen] for the names s follows: notify gets their
// notices and the empty notice.
func (s *Subscription) Listen(ctx context.Context, notify func(store.Notice)) {
	s.h.listen(ctx, &hubListener{sub: s}, notify)
}

// Follow adds name to the names s follows: from its return on, the shared
// loop hands every notice of name to s's Listen calls. It costs the hub
// O(1) per Listen call running.
func (s *Subscription) Follow(name string) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.names[name]; ok {
		return
	}
	s.names[name] = struct{}{}
	for _, l := range s.listeners {
		h.byName[name] = append(h.byName[name], l)
	}
}

// Unfollow removes name from the names s follows. It costs the hub
// O(listeners that follow name) per Listen call of s running.
func (s *Subscription) Unfollow(name string) {
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := s.names[name]; !ok {
		return
	}
	delete(s.names, name)
	for _, l := range s.listeners {
		h.unindex(name, l)
	}
}

func (h *Hub) listen(ctx context.Context, l *hubListener, notify func(store.Notice)) {
	l.queue = make(chan store.Notice, hubQueue)
	h.join(l)
	defer h.leave(l)
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-l.queue:
			if l.lost.Swap(false) {
				n = store.Notice{}
			}
			notify(n)
		}
	}
}

func (h *Hub) join(l *hubListener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[l] = struct{}{}
	if l.sub == nil {
		h.all[l] = struct{}{}
	} else {
		l.sub.listeners = append(l.sub.listeners, l)
		for name := range l.sub.names {
			h.byName[name] = append(h.byName[name], l)
		}
	}
	if h.subscribed {
		l.queue <- store.Notice{}
	}
	if h.stop != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.stop, h.done = stop, done
	go func() {
		defer close(done)
		h.run(ctx, h.fanOut)
		h.mu.Lock()
		if h.done == done {
			h.subscribed = false
		}
		h.mu.Unlock()
	}()
}

// leave removes l and, when it was the last listener, stops the shared
// loop and waits for it.
func (h *Hub) leave(l *hubListener) {
	h.mu.Lock()
	delete(h.subs, l)
	if l.sub == nil {
		delete(h.all, l)
	} else {
		l.sub.listeners = slices.DeleteFunc(l.sub.listeners, func(x *hubListener) bool { return x == l })
		for name := range l.sub.names {
			h.unindex(name, l)
		}
	}
	if len(h.subs) > 0 {
		h.mu.Unlock()
		return
	}
	stop, done := h.stop, h.done
	h.stop, h.done, h.subscribed = nil, nil, false
	h.mu.Unlock()
	stop()
	<-done
}

// unindex removes l from the listeners of name. h.mu must be held.
func (h *Hub) unindex(name string, l *hubListener) {
	ls := h.byName[name]
	i, last := slices.Index(ls, l), len(ls)-1
	ls[i], ls[last] = ls[last], nil
	if last == 0 {
		delete(h.byName, name)
	} else {
		h.byName[name] = ls[:last]
	}
}

// fanOut hands n to every listener that follows its name, and the empty
// notice to every listener, without waiting for any.
func (h *Hub) fanOut(n store.Notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n.Name == "" {
		h.subscribed = true
		for l := range h.subs {
			l.push(n)
		}
		return
	}
	for l := range h.all {
		l.push(n)
	}
	for _, l := range h.byName[n.Name] {
		l.push(n)
	}
}

// push queues n for l, or notes that l missed it when its queue is full.
func (l *hubListener) push(n store.Notice) {
	select {
	case l.queue <- n:
	default:
		l.lost.Store(true)
	}
}
