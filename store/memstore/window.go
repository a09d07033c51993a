package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// StartWindow implements [store.Windower.StartWindow]; a window derived
// from a period is taken on the store's clock ([Config.Clock]).
func (s *Store) StartWindow(ctx context.Context, p store.StartWindowParams) (store.Window, error) {
	if err := s.gate.Begin(ctx, "start window"); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("memstore: start window: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if !s.heldByLocked(now, p.Name, p.Holder, p.Token) {
		return store.Window{}, fmt.Errorf("memstore: start window of lease %q by %s with token %d refused: %w",
			p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	key := p.Key
	if key == "" {
		key = store.DerivedWindowKey(now.UnixMilli(), p.Period.Milliseconds())
	}
	id := [2]string{p.Name, key}
	w, found := s.windows[id]
	var existing *store.Window
	if found {
		existing = &w
	}
	switch store.DecideStart(existing, p) {
	case store.StartAgain:
		return w, nil
	case store.StartRefuse:
		return store.Window{}, &store.WindowDoneError{Window: w}
	case store.StartFenced:
		return store.Window{}, fmt.Errorf("memstore: window %s of lease %q was begun by token %d, after token %d: %w",
			store.WindowKeyString(key), p.Name, w.Token, p.Token, store.ErrNotHeld)
	}
	ev := store.HistoryEvent{Name: p.Name, Kind: store.EventWindowStarted, Holder: p.Holder, Token: p.Token, At: now.Round(0), Window: key}
	if found && w.Token != p.Token {
		ev.PreviousHolder, ev.PreviousToken = w.Holder, w.Token
	}
	s.recordLocked(ev)
	w = store.Window{Name: p.Name, Key: key, State: store.WindowStarted, Holder: p.Holder, Token: p.Token,
		Attempts: w.Attempts + 1, StartedAt: now.UTC().Round(0)}
	if s.windows == nil {
		s.windows = make(map[[2]string]store.Window)
	}
	s.windows[id] = w
	return w, nil
}

// FinishWindow implements [store.Windower.FinishWindow].
func (s *Store) FinishWindow(ctx context.Context, p store.FinishWindowParams) (store.Window, error) {
	if err := s.gate.Begin(ctx, "finish window"); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("memstore: finish window: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	id := [2]string{p.Name, p.Key}
	w, found := s.windows[id]
	var existing *store.Window
	if found {
		existing = &w
	}
	change, ok := store.DecideFinish(existing, p)
	if !ok || !s.heldByLocked(now, p.Name, p.Holder, p.Token) {
		return store.Window{}, fmt.Errorf("memstore: finish window %s of lease %q by %s with token %d refused: %w",
			store.WindowKeyString(p.Key), p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	if change {
		w.State, w.FinishedAt = p.Outcome, now.UTC().Round(0)
		s.windows[id] = w
		s.recordLocked(store.HistoryEvent{Name: p.Name, Kind: store.FinishedEvent(p.Outcome), Holder: p.Holder, Token: p.Token,
			At: now.Round(0), Window: p.Key})
	}
	return w, nil
}

// GetWindow implements [store.Windower.GetWindow].
func (s *Store) GetWindow(ctx context.Context, name, key string) (store.Window, error) {
	if err := s.gate.Begin(ctx, "get window"); err != nil {
		return store.Window{}, err
	}
	if err := store.ValidateWindowLookup(name, key); err != nil {
		return store.Window{}, fmt.Errorf("memstore: get window: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w, found := s.windows[[2]string{name, key}]
	if !found {
		return store.Window{}, fmt.Errorf("memstore: window %s of lease %q: %w", store.WindowKeyString(key), name, store.ErrNotFound)
	}
	return w, nil
}

// heldByLocked reports whether the lease name is held at now by holder
// with token: the compare of Release.
func (s *Store) heldByLocked(now time.Time, name string, holder store.Holder, token store.Token) bool {
	l, known := s.leases[name]
	return known && l.heldAt(now) && l.holder == holder && l.token == token
}
