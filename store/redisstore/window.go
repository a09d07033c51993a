package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/store"
)

var _ store.Windower = (*Store)(nil)

var (
	//go:embed scripts/window.lua
	windowSrc    string
	windowScript = redis.NewScript(windowSrc)
)

// StartWindow implements [store.Windower.StartWindow] with one script
// call (scripts/window.lua), which finds the lease held by the server's
// clock and decides on the window; a window derived from a period is
// taken on the server's TIME.
func (s *Store) StartWindow(ctx context.Context, p store.StartWindowParams) (store.Window, error) {
	const op = "start window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	retry := "0"
	if p.RetryFailed {
		retry = "1"
	}
	outcome, w, err := s.window(ctx, fmt.Sprintf("%s of lease %q", op, p.Name), p.Name,
		"start", p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Key, p.Period.Milliseconds(), retry)
	if err != nil {
		return store.Window{}, err
	}
	switch outcome {
	case "not-held":
		return store.Window{}, fmt.Errorf("redisstore: %s: lease %q is not held by %s with token %d: %w",
			op, p.Name, p.Holder, p.Token, store.ErrNotHeld)
	case "begun", "again":
		return w, nil
	case "refused":
		return store.Window{}, &store.WindowDoneError{Window: w}
	case "fenced":
		return store.Window{}, fmt.Errorf("redisstore: window %s of lease %q was begun by token %d, after token %d: %w",
			store.WindowKeyString(w.Key), p.Name, w.Token, p.Token, store.ErrNotHeld)
	}
	return store.Window{}, unexpectedReply(op, fmt.Sprintf("outcome %q", outcome))
}

// FinishWindow implements [store.Windower.FinishWindow] with one script
// call.
func (s *Store) FinishWindow(ctx context.Context, p store.FinishWindowParams) (store.Window, error) {
	const op = "finish window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Window{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	outcome, w, err := s.window(ctx, fmt.Sprintf("%s of lease %q", op, p.Name), p.Name,
		"finish", p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Key, p.Outcome.String())
	if err != nil {
		return store.Window{}, err
	}
	if outcome != "finished" {
		return store.Window{}, fmt.Errorf("redisstore: %s %s of lease %q by %s with token %d refused (the tenure ended, or a later one began the window): %w",
			op, store.WindowKeyString(p.Key), p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	return w, nil
}

// GetWindow implements [store.Windower.GetWindow] with one script call
// that only reads.
func (s *Store) GetWindow(ctx context.Context, name, key string) (store.Window, error) {
	const op = "get window"
	if err := s.begin(ctx, op); err != nil {
		return store.Window{}, err
	}
	if err := store.ValidateWindowLookup(name, key); err != nil {
		return store.Window{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	_, w, err := s.window(ctx, fmt.Sprintf("%s of lease %q", op, name), name, "get", "", "", 0, key)
	if err != nil {
		return store.Window{}, err
	}
	if w.State == 0 {
		return store.Window{}, fmt.Errorf("redisstore: window %s of lease %q: %w", store.WindowKeyString(key), name, store.ErrNotFound)
	}
	return w, nil
}

// window runs window.lua for lease name and returns its outcome and the
// window it returned (zero when none).
func (s *Store) window(ctx context.Context, op, name string, args ...any) (string, store.Window, error) {
	keys := []string{s.keys.Record(name), s.keys.Held(name), s.keys.Windows(name)}
	reply, err := windowScript.Run(ctx, s.client, keys, args...).StringSlice()
	if err != nil {
		return "", store.Window{}, interpretError(op, err)
	}
	if len(reply) != 3 {
		return "", store.Window{}, unexpectedReply(op, fmt.Sprintf("of %d elements", len(reply)))
	}
	if reply[2] == "" {
		return reply[0], store.Window{Name: name, Key: reply[1]}, nil
	}
	w, err := parseWindow(op, name, reply[1], reply[2])
	return reply[0], w, err
}

// parseWindow reads a window's value (see scripts/window.lua).
func parseWindow(op, name, key, v string) (store.Window, error) {
	f := strings.Split(v, "\n")
	if len(f) != 7 {
		return store.Window{}, unexpectedReply(op, fmt.Sprintf("window value %q", v))
	}
	state, err := store.ParseWindowState(f[0])
	if err != nil {
		return store.Window{}, unexpectedReply(op, err.Error())
	}
	var n [4]int64
	for i, s := range []string{f[3], f[4], f[5], f[6]} {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return store.Window{}, unexpectedReply(op, fmt.Sprintf("window value %q", v))
		}
	}
	w := store.Window{Name: name, Key: key, State: state, Holder: store.Holder{Label: f[1], Instance: f[2]},
		Token: store.Token(n[0]), Attempts: n[1], StartedAt: time.UnixMicro(n[2]).UTC()}
	if n[3] != 0 {
		w.FinishedAt = time.UnixMicro(n[3]).UTC()
	}
	return w, nil
}
