package etcdstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-dev/tenure/store"
)

var _ store.Windower = (*Store)(nil)

// windowDir holds the windows of [store.Windower], one key per lease name
// and window key: window/<name>\x00<key> (a name holds no NUL), its value
// the window as JSON, on no etcd lease, never deleted. Only StartWindow and
// FinishWindow write it, each in a transaction that also compares the
// lease's held/ key as Release does (create revision = token, value =
// holder: the key exists only while the tenure is held) and the window
// key's mod revision as it was read.
const windowDir = "window/"

// windowAttempts bounds how often a window call reads and tries again when
// the window key changed between its read and its transaction (another
// call of the same tenure).
const windowAttempts = 5

// windowValue is the value of a window/ key. Times are the caller's clock
// in Unix nanoseconds: etcd has no clock a transaction can read, so they
// only tell people when; nothing is decided on them.
type windowValue struct {
	State    string `json:"state"`
	Label    string `json:"label"`
	Instance string `json:"instance"`
	Token    int64  `json:"token"`
	Attempts int64  `json:"attempts"`
	Started  int64  `json:"started"`
	Finished int64  `json:"finished,omitempty"`
}

func (s *Store) windowKey(name, key string) string { return s.prefix + windowDir + name + "\x00" + key }

// StartWindow implements [store.Windower.StartWindow]: it reads the
// window, decides ([store.DecideStart]) and commits in one transaction
// that compares the tenure and the window as read. A window derived from a
// period is refused: etcd has no clock a transaction can read, and the
// caller's clock must not name a window. StartedAt is the caller's clock.
func (s *Store) StartWindow(ctx context.Context, p store.StartWindowParams) (store.Window, error) {
	const op = "start window"
	if err := s.begin(op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	if p.Key == "" {
		return store.Window{}, fmt.Errorf("etcdstore: %s of %q: %w: etcd has no clock a transaction can read, so it cannot derive a window from a period; name the window with a window key (tenure run --window-key, e.g. the date of the run your scheduler meant)",
			op, p.Name, store.ErrInvalid)
	}
	for range windowAttempts {
		existing, rev, err := s.readWindow(ctx, p.Name, p.Key)
		if err != nil {
			return store.Window{}, err
		}
		decision := store.DecideStart(existing, p)
		var w store.Window
		var puts []clientv3.Op
		switch decision {
		case store.StartBegin:
			w = store.Window{Name: p.Name, Key: p.Key, State: store.WindowStarted, Holder: p.Holder, Token: p.Token,
				Attempts: 1, StartedAt: time.Now().UTC().Round(0)}
			if existing != nil {
				w.Attempts = existing.Attempts + 1
			}
			puts = []clientv3.Op{clientv3.OpPut(s.windowKey(p.Name, p.Key), encodeWindow(w))}
		default:
			w = *existing
		}
		held, same, err := s.windowTxn(ctx, op, p.Name, p.Holder, p.Token, p.Key, rev, puts)
		switch {
		case err != nil:
			return store.Window{}, err
		case !held:
			return store.Window{}, fmt.Errorf("etcdstore: %s: lease %q is not held by %s with token %d: %w",
				op, p.Name, p.Holder, p.Token, store.ErrNotHeld)
		case !same:
			continue
		}
		switch decision {
		case store.StartRefuse:
			return store.Window{}, &store.WindowDoneError{Window: w}
		case store.StartFenced:
			return store.Window{}, fmt.Errorf("etcdstore: window %s of lease %q was begun by token %d, after token %d: %w",
				store.WindowKeyString(p.Key), p.Name, w.Token, p.Token, store.ErrNotHeld)
		}
		return w, nil
	}
	return store.Window{}, s.windowBusy(op, p.Name, p.Key)
}

// FinishWindow implements [store.Windower.FinishWindow] in one
// transaction that compares the tenure and the window as read.
// FinishedAt is the caller's clock.
func (s *Store) FinishWindow(ctx context.Context, p store.FinishWindowParams) (store.Window, error) {
	const op = "finish window"
	if err := s.begin(op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	refused := fmt.Errorf("etcdstore: %s %s of lease %q by %s with token %d refused (the tenure ended, or a later one began the window): %w",
		op, store.WindowKeyString(p.Key), p.Name, p.Holder, p.Token, store.ErrNotHeld)
	for range windowAttempts {
		existing, rev, err := s.readWindow(ctx, p.Name, p.Key)
		if err != nil {
			return store.Window{}, err
		}
		change, ok := store.DecideFinish(existing, p)
		if !ok {
			return store.Window{}, refused
		}
		w := *existing
		var puts []clientv3.Op
		if change {
			w.State, w.FinishedAt = p.Outcome, time.Now().UTC().Round(0)
			puts = []clientv3.Op{clientv3.OpPut(s.windowKey(p.Name, p.Key), encodeWindow(w))}
		}
		held, same, err := s.windowTxn(ctx, op, p.Name, p.Holder, p.Token, p.Key, rev, puts)
		switch {
		case err != nil:
			return store.Window{}, err
		case !held:
			return store.Window{}, refused
		case same:
			return w, nil
		}
	}
	return store.Window{}, s.windowBusy(op, p.Name, p.Key)
}

// GetWindow implements [store.Windower.GetWindow] with one read.
func (s *Store) GetWindow(ctx context.Context, name, key string) (store.Window, error) {
	const op = "get window"
	if err := s.begin(op); err != nil {
		return store.Window{}, err
	}
	if err := store.ValidateWindowLookup(name, key); err != nil {
		return store.Window{}, fmt.Errorf("etcdstore: %s: %w", op, err)
	}
	w, _, err := s.readWindow(ctx, name, key)
	if err != nil {
		return store.Window{}, err
	}
	if w == nil {
		return store.Window{}, fmt.Errorf("etcdstore: window %s of lease %q: %w", store.WindowKeyString(key), name, store.ErrNotFound)
	}
	return *w, nil
}

// readWindow returns the window (nil when there is none) and its key's mod
// revision (0 when absent).
func (s *Store) readWindow(ctx context.Context, name, key string) (*store.Window, int64, error) {
	resp, err := s.client.Get(ctx, s.windowKey(name, key))
	if err != nil {
		return nil, 0, classify(fmt.Sprintf("read window %q of %q", key, name), err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	kv := resp.Kvs[0]
	var v windowValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return nil, 0, fmt.Errorf("etcdstore: window %q of %q: %w: its value %q is no window; do other programs write under the store's prefix?",
			key, name, store.ErrUnavailable, kv.Value)
	}
	st, err := store.ParseWindowState(v.State)
	if err != nil {
		return nil, 0, fmt.Errorf("etcdstore: window %q of %q: %w: %w", key, name, store.ErrUnavailable, err)
	}
	w := &store.Window{Name: name, Key: key, State: st, Holder: store.Holder{Label: v.Label, Instance: v.Instance},
		Token: store.Token(v.Token), Attempts: v.Attempts, StartedAt: time.Unix(0, v.Started).UTC()}
	if v.Finished != 0 {
		w.FinishedAt = time.Unix(0, v.Finished).UTC()
	}
	return w, kv.ModRevision, nil
}

func encodeWindow(w store.Window) string {
	v := windowValue{State: w.State.String(), Label: w.Holder.Label, Instance: w.Holder.Instance, Token: int64(w.Token),
		Attempts: w.Attempts, Started: w.StartedAt.UnixNano()}
	if !w.FinishedAt.IsZero() {
		v.Finished = w.FinishedAt.UnixNano()
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Marshalling a struct of strings and integers cannot fail.
		return ""
	}
	return string(b)
}

// windowTxn commits puts if the tenure (holder, token) holds the lease and
// the window key's mod revision is still rev; otherwise it reads both, and
// reports which compare failed.
func (s *Store) windowTxn(ctx context.Context, op, name string, holder store.Holder, token store.Token, key string, rev int64, puts []clientv3.Op) (held, same bool, err error) {
	wk := s.windowKey(name, key)
	ours := s.ours(store.ReleaseParams{Name: name, Holder: holder, Token: token})
	unchanged := clientv3.Compare(clientv3.ModRevision(wk), "=", rev)
	resp, err := s.client.Txn(ctx).If(append(ours, unchanged)...).Then(puts...).
		Else(clientv3.OpTxn(ours, nil, nil)).Commit()
	if err != nil {
		return false, false, classify(fmt.Sprintf("%s %q of %q", op, key, name), err)
	}
	if resp.Succeeded {
		return true, true, nil
	}
	return resp.Responses[0].GetResponseTxn().Succeeded, false, nil
}

func (s *Store) windowBusy(op, name, key string) error {
	return fmt.Errorf("etcdstore: %s %s of %q: %w: the window changed under %d attempts in a row; try again",
		op, store.WindowKeyString(key), name, store.ErrUnavailable, windowAttempts)
}
