package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// restartTimeout bounds a server's restart for [storetest.Fault.Restart].
const restartTimeout = 2 * time.Minute

// NoRestartShared is why a harness over the machine's server declines to

// restart it.
const NoRestartShared = "the tests share the machine's server, which other tests use meanwhile: restarting it would fail them"

// Proxy starts a [faultnet.Proxy] in front of target (host:port), closed

// when tb ends.
func Proxy(tb testing.TB, target string) *faultnet.Proxy {
	tb.Helper()
	p, err := faultnet.Listen(target)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := p.Close(); err != nil {
			tb.Errorf("testserver: %v", err)
		}
	})
	return p
}

// Crasher is a server a [storetest.Fault] can crash and restart: a
// [Process], or a server made of one.
type Crasher interface {
	Kill()
	Restart(ctx context.Context) error
}

// CutFault returns a [storetest.Fault] on the store s whose connections

// go through p: Cut is a partition that also dropped every open

// connection (faultnet's Cut under a BlackHole), Restore ends it. With srv
// (the server behind p) not nil, Kill and Restart crash it and start it

// again, and Restart returns s.
func CutFault(p *faultnet.Proxy, srv Crasher, s store.Store) storetest.Fault {
	f := storetest.Fault{
		Cut: func(testing.TB) {
			p.BlackHole()
			p.Cut()
		},
		Restore: func(testing.TB) { p.Restore() },
	}
	if srv != nil {
		f.Kill = func(testing.TB) { srv.Kill() }
		f.Restart = func(tb testing.TB) store.Store {
			tb.Helper()
			ctx, cancel := context.WithTimeout(tb.Context(), restartTimeout)
			defer cancel()
			if err := srv.Restart(ctx); err != nil {
				tb.Fatalf("testserver: restart: %v", err)
			}
			return s
		}
	}
	return f
}

// Faults implements [storetest.Capabilities.Faults]: a store as

// NewStore makes one, on a pool of its own (Pool's configuration) through

// Faults implements [storetest.Capabilities.Faults]: a store as NewStore

// makes one, on a handle of its own (as Account, when set) through a

// Faults implements [storetest.Capabilities.Faults]: a store on a

// redis-server of its own that persists nothing (a restart loses every

// Faults implements [storetest.Capabilities.Faults]: a store on a server

// agent of its own, which keeps its Raft log on disk across a restart,

// Faults implements [storetest.Capabilities.Faults]: a store on a
