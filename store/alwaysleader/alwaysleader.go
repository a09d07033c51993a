package alwaysleader

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Token is the token of every grant this store makes.
const Token store.Token = 1

// MaxReasonLen is the longest reason [New] accepts, in bytes.
const MaxReasonLen = 1024

// Store is a [store.Store] that grants every acquisition; docs/STORES.md
// lists the optional interfaces of package store it implements. Its
// methods are safe for concurrent use. Create it with [New].
type Store struct {
	reason string

	gate *storekit.Gate

	mu     sync.Mutex
	leases map[string]*lease
}

// lease is the tenure of a name most recently acquired, renewed or
// released, kept only so that [Store.Get] can report it.
type lease struct {
	holder     store.Holder
	seq        int64
	expires    time.Time
	acquiredAt time.Time
	released   bool
	payload    string // the acquisition's; a renewal by another holder has none
}

// New returns a store that grants every acquisition. reason says why the
// job it guards may run on every instance at once, and is required: this
// store turns off mutual exclusion and fencing, and the reason is the only
// record that somebody decided that on purpose. It is trimmed of
// surrounding space; one that is then empty, longer than [MaxReasonLen]
// bytes, not valid UTF-8 or not a single line fails with an error matching
// [store.ErrInvalid].
func New(reason string) (*Store, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return nil, fmt.Errorf("alwaysleader: %w: the reason is empty; this store lets every instance lead at once, with no mutual exclusion and no fencing, so say in a sentence why running this job concurrently and repeatedly is harmless (for example \"an idempotent upsert keyed by invoice id\")", store.ErrInvalid)
	case len(reason) > MaxReasonLen:
		return nil, fmt.Errorf("alwaysleader: %w: the reason is %d bytes long; the maximum is %d", store.ErrInvalid, len(reason), MaxReasonLen)
	case !utf8.ValidString(reason):
		return nil, fmt.Errorf("alwaysleader: %w: the reason %q is not valid UTF-8", store.ErrInvalid, reason)
	}
	for _, r := range reason {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return nil, fmt.Errorf("alwaysleader: %w: the reason %q contains the control character %U; write it on one line, it goes into logs", store.ErrInvalid, reason, r)
		}
	}
	return &Store{reason: reason, gate: storekit.NewGate("alwaysleader", "alwaysleader.New"), leases: make(map[string]*lease)}, nil
}

// Reason returns the reason given to [New], trimmed: show it wherever this
// store's leases are shown.
func (s *Store) Reason() string { return s.reason }

// Acquire implements [store.Store.Acquire]: it always grants a new tenure
// to p.Holder with [Token] and seq 1, whoever else holds the lease.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("alwaysleader: acquire: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.leases[p.Name] = &lease{holder: p.Holder, seq: 1, expires: now.Add(p.TTL), acquiredAt: now.Round(0), payload: p.Payload}
	return store.Grant{Name: p.Name, Holder: p.Holder, Token: Token, Seq: 1, Remaining: p.TTL, Payload: p.Payload}, nil
}

// Renew implements [store.Store.Renew]: every entry is renewed, its seq
// advanced by one and its remaining time set to its TTL.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("alwaysleader: renew: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	results := make([]store.RenewResult, len(ps))
	for i, p := range ps {
		l, known := s.leases[p.Name]
		if !known || l.holder != p.Holder {
			l = &lease{holder: p.Holder, acquiredAt: now.Round(0)}
			s.leases[p.Name] = l
		}
		l.seq, l.expires, l.released = p.Seq+1, now.Add(p.TTL), false
		results[i] = store.RenewResult{
			Renewed: true,
			Grant:   store.Grant{Name: p.Name, Holder: p.Holder, Token: Token, Seq: l.seq, Remaining: p.TTL},
		}
	}
	return results, nil
}

// Release implements [store.Store.Release]. It always succeeds; Get
// reports the lease released when p.Holder was the last to acquire or
// renew it.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := s.begin(ctx, "release"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("alwaysleader: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, known := s.leases[p.Name]; known && l.holder == p.Holder && !l.released {
		l.released, l.expires = true, time.Now()
	}
	return nil
}

// Get implements [store.Store.Get]: the tenure last acquired, renewed or
// released under name, or [store.ErrNotFound].
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("alwaysleader: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return storekit.Lookup("alwaysleader", s.leases, name, time.Now(), (*lease).record)
}

// List implements [store.Lister.List].
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin(ctx, "list"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return storekit.Records(s.leases, time.Now(), (*lease).record), nil
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed]. Closing twice is harmless.
func (s *Store) Close() error {
	if s.gate != nil {
		s.gate.Close()
	}
	return nil
}

// begin refuses calls on a Store not made by New (it has no reason), on a
// closed store, and with a context that is already done, before anything
// is attempted.
func (s *Store) begin(ctx context.Context, op string) error {
	if s.gate == nil {
		return fmt.Errorf("alwaysleader: %s: %w: this Store was not made by alwaysleader.New, which requires a reason", op, store.ErrInvalid)
	}
	return s.gate.Begin(ctx, op)
}

func (l *lease) record(name string, now time.Time) store.Record {
	r := store.Record{
		Grant:      store.Grant{Name: name, Holder: l.holder, Token: Token, Seq: l.seq, Payload: l.payload},
		AcquiredAt: l.acquiredAt,
	}
	switch {
	case l.released:
		r.State = store.StateReleased
	case now.Before(l.expires):
		r.State = store.StateHeld
		r.Remaining = l.expires.Sub(now)
	default:
		r.State = store.StateExpired
	}
	return r
}
