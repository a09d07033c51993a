package etcdstore

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// spareShare: a spare etcd lease is taken while younger than its TTL
	// divided by this, so a tenure started on one is reported at least
	// three quarters of its TTL.
	spareShare = 4
	// maxSpareTTLs bounds the distinct TTLs a store keeps spares for.
	maxSpareTTLs = 16
)

// spares are etcd leases a store granted ahead of the acquisitions that
// will carry them: at most one per TTL in whole seconds, granted in the
// background after an acquisition used one, so that the next acquisition
// of that TTL is its transaction alone, one round trip instead of two
// (etcd's own Mutex reuses its session's lease the same way).
//
// A tenure on a spare ends when the spare does: its grant reports the
// etcd lease's TTL less the time since the spare's LeaseGrant was sent
// (see [spare.age]), never more than the server gives it (promise P3). A
// spare older than a quarter of its TTL is not taken: it is left to
// expire, and the acquisition grants a lease of its own, as every
// acquisition did before.
//
// A spare is never revoked: a copy of the process (a fork, a restored
// snapshot) carries the same spare and may have put a lease's keys on it,
// which a revocation would delete before the time that copy was told. An
// acquisition refused gives its etcd lease back as the spare instead (its
// transaction put no key on it). Spares that are not taken expire by
// themselves, and [Store.Close] leaves them to.
type spares struct {
	mu      sync.Mutex
	by      map[int64]spare // by TTL in seconds
	filling map[int64]bool  // TTLs whose next spare is being granted
	closed  bool
	ctx     context.Context // ends with the store
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// spare is an etcd lease, and when its LeaseGrant was sent by the local
// clocks.
type spare struct {
	lease *clientv3.LeaseGrantResponse
	sent  time.Time // with its monotonic clock reading
	wall  time.Time // the same instant, by the wall clock alone
}

// granting stamps a grant about to be sent now.
func granting() spare {
	now := time.Now()
	return spare{sent: now, wall: now.Round(0)}
}

func newSpares() *spares {
	ctx, cancel := context.WithCancel(context.Background())
	return &spares{by: make(map[int64]spare), filling: make(map[int64]bool), ctx: ctx, cancel: cancel}
}

// age is how long before now the lease's grant was sent: the longer of
// what the monotonic and the wall clock measured. A machine suspended
// meanwhile (a paused VM, a snapshot restored) stops the monotonic clock
// but not the etcd lease, and its wall clock shows the time that passed;
// a wall clock set back cannot shorten the age.
func (sp spare) age() time.Duration {
	now := time.Now()
	return max(now.Sub(sp.sent), now.Round(0).Sub(sp.wall))
}

// take returns the spare of secs when it is young enough to carry a
// tenure, and forgets it either way.
func (sps *spares) take(secs int64) (spare, bool) {
	sps.mu.Lock()
	defer sps.mu.Unlock()
	sp, ok := sps.by[secs]
	if !ok {
		return spare{}, false
	}
	delete(sps.by, secs)
	return sp, sp.age() < granted(sp.lease)/spareShare
}

// giveBack keeps sp, which carries no key, as the spare of secs, unless
// there is one already; it reports whether it kept it.
func (sps *spares) giveBack(secs int64, sp spare) bool {
	sps.mu.Lock()
	defer sps.mu.Unlock()
	if _, ok := sps.by[secs]; ok || sps.closed {
		return false
	}
	sps.by[secs] = sp
	return true
}

// close stops the grants in flight and waits for them.
func (sps *spares) close() {
	sps.mu.Lock()
	sps.closed = true
	sps.mu.Unlock()
	sps.cancel()
	sps.wg.Wait()
}

// leaseFor returns the etcd lease an acquisition of TTL secs puts its keys
// on, and whether it is the spare: the spare, when young enough, or one
// granted now, after the acquisition was sent.
func (s *Store) leaseFor(ctx context.Context, op string, secs int64) (spare, bool, error) {
	if sp, ok := s.spares.take(secs); ok {
		return sp, true, nil
	}
	sp := granting()
	lease, err := s.client.Grant(ctx, secs)
	if err != nil {
		return spare{}, false, classify(op+": grant etcd lease", err)
	}
	sp.lease = lease
	return sp, false, nil
}

// unused disposes of the etcd lease of a refused acquisition, which
// carries no key: it becomes the spare of secs, with the time its grant
// was sent, or, granted by that acquisition and not needed, is revoked. A
// lease that was a spare is never revoked (see [spares]).
func (s *Store) unused(ctx context.Context, secs int64, sp spare, wasSpare bool) {
	if !s.spares.giveBack(secs, sp) && !wasSpare {
		s.revoke(ctx, sp.lease.ID)
	}
}

// refill grants the next spare of TTL secs in the background, unless
// there is one or one is being granted.
func (s *Store) refill(secs int64) {
	sps := s.spares
	sps.mu.Lock()
	defer sps.mu.Unlock()
	if _, ok := sps.by[secs]; ok || sps.filling[secs] || sps.closed || len(sps.by)+len(sps.filling) >= maxSpareTTLs {
		return
	}
	sps.filling[secs] = true
	sps.wg.Go(func() {
		sp := granting()
		lease, err := s.client.Grant(sps.ctx, secs)
		sps.mu.Lock()
		defer sps.mu.Unlock()
		delete(sps.filling, secs)
		if err == nil && !sps.closed {
			sp.lease = lease
			sps.by[secs] = sp
		}
	})
}
