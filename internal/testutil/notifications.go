package testutil

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Notifications records the notices a [store.Notifier] listener reports,
// so that tests can wait for one. Pass its Notify to Listen. It is safe for
// concurrent use.
type Notifications struct {
	mu      sync.Mutex
	notices []store.Notice
	wake    chan struct{}
}

// NewNotifications returns an empty record.
func NewNotifications() *Notifications {
	return &Notifications{wake: make(chan struct{}, 1)}
}

// Notify records notice; it never blocks.
func (n *Notifications) Notify(notice store.Notice) {
	n.mu.Lock()
	n.notices = append(n.notices, notice)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// All returns every notice reported so far, in order.
func (n *Notifications) All() []store.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]store.Notice(nil), n.notices...)
}

// Count returns how many times name was reported so far.
func (n *Notifications) Count(name string) int { return len(n.Of(name)) }

// Of returns the notices reported so far for name, in order.
func (n *Notifications) Of(name string) []store.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	var of []store.Notice
	for _, got := range n.notices {
		if got.Name == name {
			of = append(of, got)
		}
	}
	return of
}

// Wait waits up to d for name to be reported (or finds it reported
// already) and says whether it was.
func (n *Notifications) Wait(name string, d time.Duration) bool {
	return n.WaitFor(func(got store.Notice) bool { return got.Name == name }, d)
}

// WaitFor waits up to d for a notice that match accepts to be reported (or
// finds one reported already) and says whether one was.
func (n *Notifications) WaitFor(match func(store.Notice) bool, d time.Duration) bool {
	return n.wait(func() bool { return n.has(match) }, d)
}

// WaitCount waits up to d for name to be reported count times (or finds
// it reported that often already) and says whether it was.
func (n *Notifications) WaitCount(name string, count int, d time.Duration) bool {
	return n.wait(func() bool { return n.Count(name) >= count }, d)
}

// wait waits up to d for done to hold, looking again at every report.
func (n *Notifications) wait(done func() bool, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for !done() {
		select {
		case <-n.wake:
		case <-timer.C:
			return done()
		}
	}
	return true
}

func (n *Notifications) has(match func(store.Notice) bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, got := range n.notices {
		if match(got) {
			return true
		}
	}
	return false
}

// RunListener runs listen(ctx, notify) on a goroutine of its own until the
// test ends, and then checks that it returned [context.Canceled] within
// timeout. ctx is the listener's parent context.
func RunListener(t testing.TB, ctx context.Context, listen func(ctx context.Context, notify func(store.Notice)) error, notify func(store.Notice), timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- listen(ctx, notify) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Listen returned %v, want context.Canceled", err)
			}
		case <-time.After(timeout):
			t.Errorf("Listen did not return within %s of its context ending", timeout)
		}
	})
}
