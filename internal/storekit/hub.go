package storekit

import (
	"context"
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
type Hub struct {
	// run is the backend's loop: it delivers notices until its context
	// ends, and the empty notice after each (re)subscription.
	run func(ctx context.Context, notify func(store.Notice))

	mu         sync.Mutex
	subs       map[*hubListener]struct{}
	subscribed bool // the shared loop is subscribed: a new listener misses nothing from now on
	stop       context.CancelFunc
	done       chan struct{} // closed when the shared loop has returned
}

// hubListener is one Listen call's queue.
type hubListener struct {
	queue chan store.Notice
	lost  atomic.Bool // the queue overflowed: notices were dropped
}

// NewHub returns a hub around the backend loop run.
func NewHub(run func(ctx context.Context, notify func(store.Notice))) *Hub {
	return &Hub{run: run, subs: make(map[*hubListener]struct{})}
}

// Listen delivers the shared loop's notices to notify, on the calling
// goroutine and in order, until ctx is done. It reports a subscription
// with the empty notice, as the contract asks: at once when the shared
// loop is already subscribed, else when it subscribes. A listener that
// falls more than a thousand notices behind gets the empty notice in place
// of those it missed.
func (h *Hub) Listen(ctx context.Context, notify func(store.Notice)) {
	l := &hubListener{queue: make(chan store.Notice, hubQueue)}
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

// fanOut hands n to every listener without waiting for any.
func (h *Hub) fanOut(n store.Notice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n.Name == "" {
		h.subscribed = true
	}
	for l := range h.subs {
		select {
		case l.queue <- n:
		default:
			l.lost.Store(true)
		}
	}
}
