package testutil

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Notifications records the lease names a [store.Notifier] listener
// reports, so that tests can wait for one. Pass its Notify to Listen. It is
// safe for concurrent use.
type Notifications struct {
	mu    sync.Mutex
	names []string
	wake  chan struct{}
}

// NewNotifications returns an empty record.
func NewNotifications() *Notifications {
	return &Notifications{wake: make(chan struct{}, 1)}
}

// Notify records name; it never blocks.
func (n *Notifications) Notify(name string) {
	n.mu.Lock()
	n.names = append(n.names, name)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Count returns how many times name was reported so far.
func (n *Notifications) Count(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, got := range n.names {
		if got == name {
			c++
		}
	}
	return c
}

// Wait waits up to d for name to be reported (or finds it reported
// already) and says whether it was.
func (n *Notifications) Wait(name string, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for n.Count(name) == 0 {
		select {
		case <-n.wake:
		case <-timer.C:
			return n.Count(name) > 0
		}
	}
	return true
}

// RunListener runs listen(ctx, notify) on a goroutine of its own until the
// test ends, and then checks that it returned [context.Canceled] within
// timeout. ctx is the listener's parent context.
func RunListener(t testing.TB, ctx context.Context, listen func(ctx context.Context, notify func(name string)) error, notify func(name string), timeout time.Duration) {
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
