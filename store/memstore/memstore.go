package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.Lister        = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)
	_ store.Historian     = (*Store)(nil)
	_ store.ForceReleaser = (*Store)(nil)
	_ store.Windower      = (*Store)(nil)
)

// DefaultHistoryEvents is how many events the history keeps when
// [Config.HistoryEvents] is zero.
const DefaultHistoryEvents = 10_000

// Config configures a [Store]. The zero value is ready to use.
type Config struct {
	// Clock returns the store's current time; every expiry is judged by it.
	// Default (nil): [time.Now]. A clock that goes backwards extends every
	// lease, exactly as a real store's clock would.
	Clock func() time.Time

	// HistoryEvents is how many events [Store.History] keeps, the most
	// recent ones (an older event is dropped when a new one would exceed
	// it). Zero means [DefaultHistoryEvents]; a negative value keeps none.
	// It bounds the memory of a long simulation: a store that keeps
	// everything grows with every tenure.
	HistoryEvents int
}

// Store is an in-memory [store.Store]; docs/STORES.md lists the optional
// interfaces of package store it implements. Its methods are safe for
// concurrent use. Create it with [New].
type Store struct {
	clock func() time.Time
	gate  *storekit.Gate

	mu        sync.Mutex
	last      store.Token // the greatest token handed out, for any name
	leases    map[string]*lease
	listeners map[*listener]struct{}
	// history holds the recorded events, oldest first; keep is how many.
	history []store.HistoryEvent
	keep    int
	// windows holds the windows of [store.Windower], by name and key.
	windows map[[2]string]store.Window
}

// lease is the state of one name. A lease is held when it is not released
// and its expiry is after the store's now.
type lease struct {
	holder     store.Holder
	token      store.Token
	seq        int64
	expires    time.Time
	acquiredAt time.Time
	released   bool
	payload    string

	// line holds the followers waiting for the lease, first come first;
	// a released lease is kept for keptFor until keptUntil.
	line      []waiter
	keptFor   store.Holder
	keptUntil time.Time
}

// waiter is one follower in a lease's line, forgotten after until.
type waiter struct {
	holder store.Holder
	until  time.Time
}

// listener is one [Store.Listen] call's queue. queue is guarded by
// Store.mu; wake is buffered so that signalling it never blocks.
type listener struct {
	queue []store.Notice
	wake  chan struct{}
}

// New returns an empty store.
func New(cfg Config) *Store {
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	keep := cfg.HistoryEvents
	switch {
	case keep == 0:
		keep = DefaultHistoryEvents
	case keep < 0:
		keep = 0
	}
	return &Store{
		keep:      keep,
		clock:     clock,
		gate:      storekit.NewGate("memstore", "memstore.New"),
		leases:    make(map[string]*lease),
		listeners: make(map[*listener]struct{}),
	}
}

// Acquire implements [store.Store.Acquire].
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.gate.Begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("memstore: acquire: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquireLocked(s.clock(), p)
}

// AcquireBatch implements [store.BatchAcquirer.AcquireBatch].
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.gate.Begin(ctx, "acquire"); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, fmt.Errorf("memstore: acquire: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	res := make([]store.AcquireResult, len(ps))
	for i, p := range ps {
		res[i].Grant, res[i].Err = s.acquireLocked(now, p)
	}
	return res, nil
}

// acquireLocked carries out p, which is valid, at now. s.mu must be held.
func (s *Store) acquireLocked(now time.Time, p store.AcquireParams) (store.Grant, error) {
	l, known := s.leases[p.Name]
	if known {
		if err := l.refuse(p, now); err != nil {
			return store.Grant{}, err
		}
	}
	takeover := known && !l.released
	ev := store.HistoryEvent{Name: p.Name, Kind: store.EventGranted}
	if known {
		ev.PreviousHolder, ev.PreviousToken = l.holder, l.token
	}
	if takeover {
		ev.Kind = store.EventTakenOver
	}
	s.last++
	next := &lease{
		holder:     p.Holder,
		token:      s.last,
		seq:        1,
		expires:    now.Add(p.TTL),
		acquiredAt: now.Round(0),
		payload:    p.Payload,
	}
	if known {
		next.line = slices.DeleteFunc(l.line, func(w waiter) bool { return w.holder == p.Holder })
	}
	s.leases[p.Name] = next
	ev.Holder, ev.Token, ev.At = next.holder, next.token, next.acquiredAt
	s.recordLocked(ev)
	s.notifyLocked(store.Notice{Name: p.Name, Kind: store.NoticeAcquired, Holder: p.Holder, Remaining: p.TTL})
	return next.grant(p.Name, now), nil
}

// refuse returns the [*store.HeldError] that refuses p at now, or nil when
// p may take the lease: when it is not held and not kept for another
// follower. A refused p that asks to wait is put in line, or keeps its
// place there.
func (l *lease) refuse(p store.AcquireParams, now time.Time) error {
	l.line = slices.DeleteFunc(l.line, func(w waiter) bool { return !now.Before(w.until) })
	var he *store.HeldError
	switch {
	case l.heldAt(now):
		he = &store.HeldError{Name: p.Name, Holder: l.holder, Token: l.token, Seq: l.seq, Remaining: l.expires.Sub(now), Payload: l.payload}
	case now.Before(l.keptUntil) && l.keptFor != p.Holder:
		he = &store.HeldError{Name: p.Name, Token: l.token, Next: l.keptFor, Remaining: l.keptUntil.Sub(now)}
	default:
		return nil
	}
	if p.Wait {
		until := now.Add(he.Remaining + 2*p.TTL)
		i := slices.IndexFunc(l.line, func(w waiter) bool { return w.holder == p.Holder })
		if i < 0 {
			i = len(l.line)
			l.line = append(l.line, waiter{holder: p.Holder})
		}
		l.line[i].until = until
		he.Position = i + 1
	}
	return he
}

// Renew implements [store.Store.Renew].
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.gate.Begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("memstore: renew: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	results := make([]store.RenewResult, len(ps))
	for i, p := range ps {
		l, known := s.leases[p.Name]
		if !known {
			results[i] = store.RenewResult{Grant: store.Grant{Name: p.Name}}
			continue
		}
		renewed := l.heldAt(now) && l.holder == p.Holder && l.token == p.Token && l.seq == p.Seq
		if renewed {
			l.seq++
			l.expires = now.Add(p.TTL)
		}
		g := l.grant(p.Name, now)
		g.Payload = "" // a renewal reports no payload (see store.Grant)
		results[i] = store.RenewResult{Renewed: renewed, Grant: g}
	}
	return results, nil
}

// Release implements [store.Store.Release].
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "release", p, store.EventReleased)
}

// ForceRelease implements [store.ForceReleaser]: [Store.Release],
// recorded as an operator's.
func (s *Store) ForceRelease(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "force release", p, store.EventForceReleased)
}

func (s *Store) release(ctx context.Context, op string, p store.ReleaseParams, kind store.EventKind) error {
	if err := s.gate.Begin(ctx, op); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.releaseLocked(s.clock(), p, kind)
}

// ReleaseBatch implements [store.BatchReleaser.ReleaseBatch].
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if err := s.gate.Begin(ctx, "release"); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, fmt.Errorf("memstore: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = s.releaseLocked(now, p, store.EventReleased)
	}
	return errs, nil
}

func (s *Store) releaseLocked(now time.Time, p store.ReleaseParams, kind store.EventKind) error {
	l, known := s.leases[p.Name]
	if !known || !l.heldAt(now) || l.holder != p.Holder || l.token != p.Token {
		return fmt.Errorf("memstore: release of lease %q by %s with token %d refused: %w",
			p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	l.released = true
	l.expires = now
	s.recordLocked(store.HistoryEvent{Name: p.Name, Kind: kind, Holder: l.holder, Token: l.token, At: now.Round(0)})
	n := store.Notice{Name: p.Name, Kind: store.NoticeReleased}
	l.line = slices.DeleteFunc(l.line, func(w waiter) bool { return !now.Before(w.until) })
	if len(l.line) > 0 {
		l.keptFor, l.keptUntil = l.line[0].holder, now.Add(store.Handoff)
		n.Next = l.keptFor
	}
	s.notifyLocked(n)
	return nil
}

// History implements [store.Historian]: the store keeps the most recent
// [Config.HistoryEvents] events, of every lease together.
func (s *Store) History(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	if err := s.gate.Begin(ctx, "history"); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: history: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []store.HistoryEvent
	oldest := max(0, len(s.history)-s.keep)
	for i := len(s.history) - 1; i >= oldest && len(found) < p.EffectiveLimit(); i-- {
		ev := s.history[i]
		if (p.Name != "" && ev.Name != p.Name) || ev.At.Before(p.Since) {
			continue
		}
		found = append(found, ev)
	}
	slices.Reverse(found)
	if found == nil {
		found = []store.HistoryEvent{}
	}
	return found, nil
}

// recordLocked appends ev to the history. Events beyond the most recent
// s.keep are invisible to History and dropped in bulk, so that recording
// stays amortised O(1). s.mu must be held.
func (s *Store) recordLocked(ev store.HistoryEvent) {
	if s.keep == 0 {
		return
	}
	ev.At = ev.At.UTC()
	s.history = append(s.history, ev)
	if len(s.history) >= 2*s.keep {
		s.history = append(s.history[:0:0], s.history[len(s.history)-s.keep:]...)
	}
}

// Get implements [store.Store.Get].
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.gate.Begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return storekit.Lookup("memstore", s.leases, name, s.clock(), (*lease).record)
}

// List implements [store.Lister.List].
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.gate.Begin(ctx, "list"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return storekit.Records(s.leases, s.clock(), (*lease).record), nil
}

// Listen implements [store.Notifier.Listen]. notify runs on the calling
// goroutine, one name at a time, in the order the store changed. Listen
// returns ctx's error when ctx is done and an error matching
// [store.ErrClosed] when the store is closed.
func (s *Store) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.gate.Listen(ctx, notify, s.deliver)
}

// deliver is the loop of [Store.Listen].
func (s *Store) deliver(ctx context.Context, notify func(store.Notice)) {
	l := &listener{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	notify(store.Notice{}) // subscribed: nothing announced from now on is missed
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		s.mu.Lock()
		notices := l.queue
		l.queue = nil
		s.mu.Unlock()
		for _, n := range notices {
			if ctx.Err() != nil {
				return
			}
			notify(n)
		}
	}
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed] and every [Store.Listen] returns. Closing twice is
// harmless.
func (s *Store) Close() error {
	s.gate.Close()
	return nil
}

// notifyLocked queues n for every listener. s.mu must be held.
func (s *Store) notifyLocked(n store.Notice) {
	for l := range s.listeners {
		l.queue = append(l.queue, n)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *lease) heldAt(now time.Time) bool {
	return !l.released && now.Before(l.expires)
}

// grant reports l as a [store.Grant]: with its holder, payload and
// remaining time while it is held, with none of them when it is not.
func (l *lease) grant(name string, now time.Time) store.Grant {
	g := store.Grant{Name: name, Token: l.token, Seq: l.seq}
	if l.heldAt(now) {
		g.Holder = l.holder
		g.Payload = l.payload
		g.Remaining = l.expires.Sub(now)
		g.At = now.Round(0)
	}
	return g
}

// record reports l as a [store.Record], naming the last holder even when
// the lease is no longer held.
func (l *lease) record(name string, now time.Time) store.Record {
	r := store.Record{Grant: l.grant(name, now), AcquiredAt: l.acquiredAt}
	r.Holder = l.holder
	r.Payload = l.payload
	switch {
	case l.released:
		r.State = store.StateReleased
	case l.heldAt(now):
		r.State = store.StateHeld
	default:
		r.State = store.StateExpired
	}
	return r
}
