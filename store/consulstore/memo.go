package consulstore

import (
	"context"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

const (
	// reapQueue bounds the sessions waiting to be destroyed; beyond it
	// they are left to expire by themselves.
	reapQueue = 4096
	// memoSweepMin is the fewest remembered leases at which the memo
	// looks for entries of sessions that have certainly ended.
	memoSweepMin = 64
)

// written is what the store remembers of its own last write to a lease
// record: the tenure it wrote (holder, token, seq, the record's value), the
// record's ModifyIndex after the write and the session that locks it.
//
// It is a hint, never a decision: a renewal that presents exactly this
// holder, token and seq sends its compare-and-set on index without reading
// the record first. The compare-and-set itself (a check-index on the
// record, one on the counter with the token, the unlock by session) is
// what decides; when the record changed in any way, it fails and the store
// reads the lease and decides as it would have without the hint.
type written struct {
	token   store.Token
	val     value
	index   uint64
	session string
	// ends is when the session has certainly ended by the local clock
	// (twice its TTL after the write was sent): the entry is then useless.
	ends time.Time
}

// lease returns the remembered write as a lease read from Consul.
func (w written) lease(name string) lease {
	return lease{name: name, exists: true, val: w.val, index: w.index, session: w.session, token: w.token}
}

// memo remembers the store's own last write per lease and how many of the
// remembered leases each session locks. The store creates every session it
// uses for a fresh set of leases (one acquisition, the leases of one
// batch of acquisitions that share a TTL, or one renewal's batch) and
// never moves a lease into an existing session, so when none of the
// leases it put into a session is there any more, the session holds
// nothing and can be destroyed. A copy of the process (a fork, a restored
// snapshot) carries the same memo; it can only move leases out of the
// sessions both know, never into them, so what either destroys is empty.
type memo struct {
	mu      sync.Mutex
	leases  map[string]written
	members map[string]int // session ID → remembered leases it locks
	// tainted holds the sessions a renewal may have moved leases into
	// without knowing (its transaction's outcome was unknown): the memo
	// cannot count their leases, so they are never renewed in place. A
	// session the memo has no lease in cannot be renewed in place anyway,
	// so the mark goes with its last lease.
	tainted map[string]struct{}
	sweepAt int
	// changed is closed, and replaced, when a lease is remembered or
	// forgotten (see [memo.changes]).
	changed chan struct{}
}

func newMemo() *memo {
	return &memo{leases: make(map[string]written), members: make(map[string]int), tainted: make(map[string]struct{}), sweepAt: memoSweepMin,
		changed: make(chan struct{})}
}

// changes returns a channel closed when the memo next remembers or
// forgets a lease, which may change what [memo.holds] reports.
func (m *memo) changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// touch wakes the waiters of [memo.changes]; m.mu is held.
func (m *memo) touch() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// reusable returns the session that locks every one of names, as
// remembered, when it locks no other lease the store put into it and was
// created with ttl: a renewal of exactly names may then renew that session
// in place instead of moving them to a new one, since no lease is in it
// that the renewal leaves out.
func (m *memo) reusable(names []string, ttl time.Duration) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(names) == 0 {
		return "", false
	}
	session := m.leases[names[0]].session
	for _, name := range names {
		w, ok := m.leases[name]
		if !ok || w.session != session || w.val.TTLMillis != ttl.Milliseconds() {
			return "", false
		}
	}
	_, tainted := m.tainted[session]
	now := time.Now()
	for _, name := range names {
		if now.After(m.leases[name].ends) {
			return "", false
		}
	}
	return session, !tainted && session != "" && m.members[session] == len(names)
}

// taint records that leases may be in session id without the memo knowing
// it.
func (m *memo) taint(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.members[id] > 0 {
		m.tainted[id] = struct{}{}
	}
}

// hint returns the remembered write of lease name when it is the tenure p
// presents.
func (m *memo) hint(p store.RenewParams) (written, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.leases[p.Name]
	return w, ok && w.val.holder() == p.Holder && w.token == p.Token && w.val.Seq == p.Seq
}

// holds reports whether lease name is locked by the store's own last
// write to it, as far as the memo knows: written less than its TTL ago or
// renewed since, and not left.
func (m *memo) holds(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.leases[name]
	return ok && time.Now().Before(w.ends.Add(-w.val.ttl()))
}

// wrote records a write to lease name that left it locked by w.session. It
// returns the session the lease left when no remembered lease is in it
// any more ("" otherwise). inPlace says the write kept the lease in its
// session: if the memo has forgotten that session meanwhile (see
// [memo.sweep]) it does not learn it again, so that it never counts
// fewer of a session's leases than the session holds.
func (m *memo) wrote(name string, w written, inPlace bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inPlace && m.members[w.session] == 0 {
		return m.drop(name)
	}
	m.members[w.session]++
	emptied := m.drop(name)
	m.leases[name] = w
	m.touch()
	if len(m.leases) >= m.sweepAt {
		m.sweep(time.Now())
	}
	return emptied
}

// left records that lease name is not locked by the session the memo has
// for it (it was released, taken over or expired). It returns that session
// when no remembered lease is in it any more.
func (m *memo) left(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.drop(name)
}

// lost records that lease name was read locked by session ("" when by
// none). When that is not the session the memo has for it, the lease left
// it, and lost returns that session if no remembered lease is in it any
// more.
func (m *memo) lost(name, session string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w, ok := m.leases[name]; !ok || w.session == session {
		return ""
	}
	return m.drop(name)
}

// drop forgets lease name; m.mu is held.
func (m *memo) drop(name string) string {
	w, ok := m.leases[name]
	if !ok {
		return ""
	}
	delete(m.leases, name)
	m.touch()
	if m.members[w.session]--; m.members[w.session] > 0 {
		return ""
	}
	delete(m.members, w.session)
	delete(m.tainted, w.session)
	return w.session
}

// sweep forgets the leases of every session one of whose leases was last
// written longer ago than twice the session's TTL: the session has ended,
// unless a change of Consul leader re-armed its timer. All of a session's
// leases go at once, so the memo never counts fewer leases in a session
// than it holds; a session it has no lease in is never renewed in place,
// as no write names it again. m.mu is held.
func (m *memo) sweep(now time.Time) {
	ended := make(map[string]bool)
	for _, w := range m.leases {
		if now.After(w.ends) {
			ended[w.session] = true
		}
	}
	for name, w := range m.leases {
		if ended[w.session] {
			m.drop(name)
		}
	}
	m.sweepAt = max(memoSweepMin, 2*len(m.leases))
}

// reap queues the destruction of session id, which holds nothing, and
// starts the goroutine that destroys queued sessions if it is not running.
// [Store.Close] waits for that goroutine. A session that cannot be queued
// (the store is closed, or the queue is full) is left to expire by itself,
// within twice its TTL.
func (s *Store) reap(id string) {
	if id == "" {
		return
	}
	s.reapMu.Lock()
	defer s.reapMu.Unlock()
	if s.gate.Closed() || len(s.reapIDs) >= reapQueue {
		return
	}
	s.reapIDs = append(s.reapIDs, id)
	if !s.reaping {
		s.reaping = true
		s.reapers.Go(s.reapLoop)
	}
}

// reapLoop destroys queued sessions until the queue is empty, or until the
// store has been closed for [cleanupTimeout].
func (s *Store) reapLoop() {
	for {
		s.reapMu.Lock()
		if len(s.reapIDs) == 0 || s.reapCtx.Err() != nil {
			s.reapIDs, s.reaping = nil, false
			s.reapMu.Unlock()
			return
		}
		id := s.reapIDs[0]
		s.reapIDs = s.reapIDs[1:]
		s.reapMu.Unlock()
		ctx, cancel := context.WithTimeout(s.reapCtx, cleanupTimeout)
		// Best effort: a session that is not destroyed expires by itself.
		_, _ = s.client.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx))
		cancel()
	}
}
