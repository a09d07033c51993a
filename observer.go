package tenure

import "sync"

// observer delivers transitions to a callback in order, none dropped,
// without ever blocking the lease loop: an unbounded queue drained by one
// goroutine.
type observer struct {
	fn     func(Transition)
	mu     sync.Mutex
	queue  []Transition
	closed bool
	wake   chan struct{}
}

func newObserver(fn func(Transition)) *observer {
	return &observer{fn: fn, wake: make(chan struct{}, 1)}
}

func (o *observer) push(t Transition) {
	if o.fn == nil {
		return
	}
	o.mu.Lock()
	o.queue = append(o.queue, t)
	o.mu.Unlock()
	o.signal()
}

func (o *observer) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

func (o *observer) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run calls fn for every transition pushed, and returns once close was
// called and the queue is empty.
func (o *observer) run() {
	for {
		o.mu.Lock()
		batch, closed := o.queue, o.closed
		o.queue = nil
		o.mu.Unlock()
		for _, t := range batch {
			o.fn(t)
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-o.wake
		}
	}
}
