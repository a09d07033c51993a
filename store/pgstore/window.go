package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/store"
)

var _ store.Windower = (*Store)(nil)

// The statements of the windows, over the functions of migration 002 (see
// functions/window_*.sql).
const (
	windowStartSQL = `SELECT w.outcome, w.window_key, w.state, w.holder_label, w.holder_instance, w.token, w.attempts,
    w.started_at, w.finished_at
FROM {{window_start_fn}}($1::text, $2::text, $3::text, $4::bigint, $5::text, $6::bigint, $7::boolean) AS w`
	windowFinishSQL = `SELECT w.ok, w.state, w.holder_label, w.holder_instance, w.token, w.attempts, w.started_at, w.finished_at
FROM {{window_finish_fn}}($1::text, $2::text, $3::text, $4::text, $5::bigint, $6::text) AS w`
	windowGetSQL = `SELECT w.state, w.holder_label, w.holder_instance, w.token, w.attempts, w.started_at, w.finished_at
FROM {{window_get_fn}}($1::text, $2::text) AS w`
)

// windowRow is a window as the functions return it; the columns are null
// where there is no window.
type windowRow struct {
	state, label, instance *string
	token, attempts        *int64
	started, finished      *time.Time
}

func (r *windowRow) dest() []any {
	return []any{&r.state, &r.label, &r.instance, &r.token, &r.attempts, &r.started, &r.finished}
}

// window returns the window r holds, or nil when it holds none.
func (r *windowRow) window(name, key string) (*store.Window, error) {
	if r.state == nil {
		return nil, nil
	}
	st, err := store.ParseWindowState(*r.state)
	if err != nil {
		return nil, err
	}
	w := &store.Window{Name: name, Key: key, State: st, Holder: store.Holder{Label: *r.label, Instance: *r.instance},
		Token: store.Token(*r.token), Attempts: *r.attempts, StartedAt: r.started.UTC()}
	if r.finished != nil {
		w.FinishedAt = r.finished.UTC()
	}
	return w, nil
}

// StartWindow implements [store.Windower.StartWindow] in one statement
// (the function window_start): the lease row is locked and found held by
// the server's clock, then the window is decided on; a window derived
// from a period is taken on the server's clock_timestamp().
func (s *Store) StartWindow(ctx context.Context, p store.StartWindowParams) (store.Window, error) {
	const op = "start window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var key *string
	if p.Key != "" {
		key = &p.Key
	}
	var (
		outcome string
		gotKey  *string
		r       windowRow
	)
	err := s.pool.QueryRow(ctx, s.obj.renderer()(windowStartSQL),
		p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token), key, p.Period.Milliseconds(), p.RetryFailed,
	).Scan(append([]any{&outcome, &gotKey}, r.dest()...)...)
	if err != nil {
		return store.Window{}, interpretError(fmt.Sprintf("%s of lease %q", op, p.Name), err)
	}
	if outcome == "not-held" {
		return store.Window{}, fmt.Errorf("pgstore: %s: lease %q is not held by %s with token %d: %w",
			op, p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	w, err := r.window(p.Name, *gotKey)
	if err != nil || w == nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: window_start answered %q without a window: %v", op, outcome, err)
	}
	switch outcome {
	case "begun", "again":
		return *w, nil
	case "refused":
		return store.Window{}, &store.WindowDoneError{Window: *w}
	case "fenced":
		return store.Window{}, fmt.Errorf("pgstore: window %s of lease %q was begun by token %d, after token %d: %w",
			store.WindowKeyString(w.Key), p.Name, w.Token, p.Token, store.ErrNotHeld)
	}
	return store.Window{}, fmt.Errorf("pgstore: %s: window_start answered %q, which this library does not know; upgrade it", op, outcome)
}

// FinishWindow implements [store.Windower.FinishWindow] in one statement
// (the function window_finish).
func (s *Store) FinishWindow(ctx context.Context, p store.FinishWindowParams) (store.Window, error) {
	const op = "finish window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var (
		ok bool
		r  windowRow
	)
	err := s.pool.QueryRow(ctx, s.obj.renderer()(windowFinishSQL),
		p.Name, p.Key, p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Outcome.String(),
	).Scan(append([]any{&ok}, r.dest()...)...)
	if err != nil {
		return store.Window{}, interpretError(fmt.Sprintf("%s of lease %q", op, p.Name), err)
	}
	if !ok {
		return store.Window{}, fmt.Errorf("pgstore: %s %s of lease %q by %s with token %d refused (the tenure ended, or a later one began the window): %w",
			op, store.WindowKeyString(p.Key), p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	w, err := r.window(p.Name, p.Key)
	if err != nil || w == nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: window_finish answered without a window: %v", op, err)
	}
	return *w, nil
}

// GetWindow implements [store.Windower.GetWindow].
func (s *Store) GetWindow(ctx context.Context, name, key string) (store.Window, error) {
	const op = "get window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := store.ValidateWindowLookup(name, key); err != nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var r windowRow
	err := s.pool.QueryRow(ctx, s.obj.renderer()(windowGetSQL), name, key).Scan(r.dest()...)
	if err == pgx.ErrNoRows {
		return store.Window{}, fmt.Errorf("pgstore: window %s of lease %q: %w", store.WindowKeyString(key), name, store.ErrNotFound)
	}
	if err != nil {
		return store.Window{}, interpretError(fmt.Sprintf("%s of lease %q", op, name), err)
	}
	w, err := r.window(name, key)
	if err != nil || w == nil {
		return store.Window{}, fmt.Errorf("pgstore: %s: window_get answered without a window: %v", op, err)
	}
	return *w, nil
}
