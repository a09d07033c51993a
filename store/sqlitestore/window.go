package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.Windower = (*Store)(nil)

// StartWindow implements [store.Windower.StartWindow] in one IMMEDIATE
// transaction, which checks the tenure and reads and writes the window; a
// window derived from a period is taken on the host clock read under the
// write lock, the clock every expiry of this store is judged by.
func (s *Store) StartWindow(ctx context.Context, p store.StartWindowParams) (store.Window, error) {
	const op = "start window"
	if err := s.gate.Check(op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	var out store.Window
	err := s.writeTx(ctx, op, func(w *write) error {
		tx, now := w.tx, w.now
		if err := heldBy(ctx, tx, now, p.Name, p.Holder, p.Token); err != nil {
			return err
		}
		key := p.Key
		if key == "" {
			key = store.DerivedWindowKey(time.Unix(0, now).UnixMilli(), p.Period.Milliseconds())
		}
		existing, err := readWindow(ctx, tx, p.Name, key)
		if err != nil {
			return err
		}
		switch store.DecideStart(existing, p) {
		case store.StartAgain:
			out = *existing
			return nil
		case store.StartRefuse:
			return &store.WindowDoneError{Window: *existing}
		case store.StartFenced:
			return fmt.Errorf("window %s of lease %q was begun by token %d, after token %d: %w",
				store.WindowKeyString(key), p.Name, existing.Token, p.Token, store.ErrNotHeld)
		}
		attempts := int64(1)
		if existing != nil {
			attempts = existing.Attempts + 1
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO tenure_windows
    (name, window_key, state, holder_label, holder_instance, token, attempts, started_at, finished_at)
VALUES (?1, ?2, 'started', ?3, ?4, ?5, ?6, ?7, 0)
ON CONFLICT (name, window_key) DO UPDATE SET state = 'started', holder_label = ?3, holder_instance = ?4,
    token = ?5, attempts = ?6, started_at = ?7, finished_at = 0`,
			p.Name, key, p.Holder.Label, p.Holder.Instance, p.Token, attempts, now)
		if err != nil {
			return err
		}
		out = store.Window{Name: p.Name, Key: key, State: store.WindowStarted, Holder: p.Holder, Token: p.Token,
			Attempts: attempts, StartedAt: time.Unix(0, now).UTC()}
		ev := store.HistoryEvent{Name: p.Name, Kind: store.EventWindowStarted, Holder: p.Holder, Token: p.Token, Window: key}
		if existing != nil && existing.Token != p.Token {
			ev.PreviousHolder, ev.PreviousToken = existing.Holder, existing.Token
		}
		return s.record(ctx, tx, now, ev)
	})
	return out, err
}

// FinishWindow implements [store.Windower.FinishWindow] in one IMMEDIATE
// transaction.
func (s *Store) FinishWindow(ctx context.Context, p store.FinishWindowParams) (store.Window, error) {
	const op = "finish window"
	if err := s.gate.Check(op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	var out store.Window
	err := s.writeTx(ctx, op, func(w *write) error {
		tx, now := w.tx, w.now
		existing, err := readWindow(ctx, tx, p.Name, p.Key)
		if err != nil {
			return err
		}
		change, ok := store.DecideFinish(existing, p)
		if !ok {
			return fmt.Errorf("window %s of lease %q is not begun by %s with token %d: %w",
				store.WindowKeyString(p.Key), p.Name, p.Holder, p.Token, store.ErrNotHeld)
		}
		if err := heldBy(ctx, tx, now, p.Name, p.Holder, p.Token); err != nil {
			return err
		}
		out = *existing
		if !change {
			return nil
		}
		out.State, out.FinishedAt = p.Outcome, time.Unix(0, now).UTC()
		_, err = tx.ExecContext(ctx, `UPDATE tenure_windows SET state = ?3, finished_at = ?4
WHERE name = ?1 AND window_key = ?2`, p.Name, p.Key, p.Outcome.String(), now)
		if err != nil {
			return err
		}
		return s.record(ctx, tx, now, store.HistoryEvent{Name: p.Name, Kind: store.FinishedEvent(p.Outcome),
			Holder: p.Holder, Token: p.Token, Window: p.Key})
	})
	return out, err
}

// GetWindow implements [store.Windower.GetWindow].
func (s *Store) GetWindow(ctx context.Context, name, key string) (store.Window, error) {
	const op = "get window"
	if err := s.gate.Check(op); err != nil {
		return store.Window{}, err
	}
	if err := store.ValidateWindowLookup(name, key); err != nil {
		return store.Window{}, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	w, err := readWindow(ctx, s.db, name, key)
	if err != nil {
		return store.Window{}, s.classify(op, err)
	}
	if w == nil {
		return store.Window{}, fmt.Errorf("sqlitestore: window %s of lease %q: %w", store.WindowKeyString(key), name, store.ErrNotFound)
	}
	return *w, nil
}

// heldBy fails with [store.ErrNotHeld] unless the lease name is held at
// now by holder with token: the compare of Release.
func heldBy(ctx context.Context, tx *sql.Tx, now int64, name string, holder store.Holder, token store.Token) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM tenure_leases
WHERE name = ?1 AND holder_label = ?2 AND holder_instance = ?3 AND token = ?4 AND released = 0 AND expires_at > ?5`,
		name, holder.Label, holder.Instance, token, now).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("lease %q is not held by %s with token %d: %w", name, holder, token, store.ErrNotHeld)
	}
	return err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readWindow returns the window's row, or nil when there is none.
func readWindow(ctx context.Context, q querier, name, key string) (*store.Window, error) {
	var (
		w                 = store.Window{Name: name, Key: key}
		state             string
		started, finished int64
	)
	err := q.QueryRowContext(ctx, `SELECT state, holder_label, holder_instance, token, attempts, started_at, finished_at
FROM tenure_windows WHERE name = ?1 AND window_key = ?2`, name, key).Scan(
		&state, &w.Holder.Label, &w.Holder.Instance, &w.Token, &w.Attempts, &started, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if w.State, err = store.ParseWindowState(state); err != nil {
		return nil, err
	}
	w.StartedAt = time.Unix(0, started).UTC()
	if finished != 0 {
		w.FinishedAt = time.Unix(0, finished).UTC()
	}
	return &w, nil
}
