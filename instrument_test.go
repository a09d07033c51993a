package tenure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// events records what a client reports to its Observer.
type events struct {
	mu  sync.Mutex
	all []tenure.Event
}

func (r *events) Handle(e tenure.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, e)
}

// of returns the events of kind k, in order.
func (r *events) of(k tenure.EventKind) []tenure.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []tenure.Event
	for _, e := range r.all {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// logLines records what a client logs, as decoded JSON lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the lines whose message starts with msg.
func (l *logLines) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, raw := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if raw == "" {
			continue
		}
		var line map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &line), raw)
		if strings.HasPrefix(line["msg"].(string), msg) {
			out = append(out, line)
		}
	}
	return out
}

func TestObserverSeesATenureFromGrantToRelease(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := &events{}
		b := setup(t, nil, tenure.Config{TTL: ttl, Observer: rec})
		l := b.acquire(t, "billing")
		tok := l.Token()

		acq := rec.of(tenure.EventAcquired)
		require.Len(t, acq, 1)
		require.Equal(t, "billing", acq[0].Name)
		require.Equal(t, tok, acq[0].Token)
		require.Equal(t, l.Holder(), acq[0].Holder)
		require.Equal(t, "memstore", acq[0].Store)
		require.False(t, acq[0].Campaign, "Acquire is no campaign")

		elapse(ttl/3 + time.Millisecond)
		synctest.Wait()
		renewed := rec.of(tenure.EventRenewed)
		require.Len(t, renewed, 1, "one renewal round in one renew interval")
		require.Equal(t, 1, renewed[0].Batch)
		require.NoError(t, renewed[0].Err)

		require.NoError(t, l.Release(t.Context()))
		lost := rec.of(tenure.EventLost)
		require.Len(t, lost, 1)
		require.Equal(t, tenure.LossReleased, lost[0].Reason)
		require.Equal(t, tok, lost[0].Token)
	})
}

func TestObserverTimesCampaignsAndCountsNotifications(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := setup(t, nil, tenure.Config{TTL: ttl})
		rec := &events{}
		b := setup(t, a.store, tenure.Config{TTL: ttl, Label: "follower", Observer: rec})
		first := a.acquire(t, "billing")

		got := make(chan *tenure.Lease, 1)
		go func() {
			l, err := b.client.Campaign(t.Context(), "billing")
			require.NoError(t, err)
			got <- l
		}()
		elapse(7 * time.Second)
		require.NoError(t, first.Release(t.Context()))
		second := <-got

		acq := rec.of(tenure.EventAcquired)
		require.Len(t, acq, 1)
		require.True(t, acq[0].Campaign)
		require.Equal(t, second.Token(), acq[0].Token)
		require.GreaterOrEqual(t, acq[0].Duration, 7*time.Second, "the campaign waited for the release")
		require.Less(t, acq[0].Duration, 8*time.Second, "and no longer")
		notified := rec.of(tenure.EventNotified)
		require.NotEmpty(t, notified, "the release was announced")
		require.Equal(t, "billing", notified[0].Name)
		require.Len(t, rec.of(tenure.EventSubscribed), 1, "the listener subscribed once")
	})
}

func TestObserverSeesSuspensionsAndClones(t *testing.T) {
	t.Parallel()
	t.Run("Suspension", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			rec := &events{}
			logs := &logLines{}
			clock := &skewClock{base: tenure.NewSystemClock()}
			b := setup(t, nil, tenure.Config{TTL: ttl, Clock: clock, Observer: rec, Logger: logs.logger()})
			l := b.acquire(t, "billing")
			clock.offset.Store(int64(5 * time.Second))
			require.Zero(t, l.Token())
			<-l.Done()
			synctest.Wait()
			require.Len(t, rec.of(tenure.EventSuspended), 1)
			require.Empty(t, rec.of(tenure.EventCloneDetected))
			lost := rec.of(tenure.EventLost)
			require.Len(t, lost, 1)
			require.Equal(t, tenure.LossSuspended, lost[0].Reason)
			lines := logs.lines(t, "process suspension detected")
			require.Len(t, lines, 1)
			require.Equal(t, "WARN", lines[0]["level"])
			require.Equal(t, b.client.Holder().String(), lines[0]["holder"], "the log names the new identity")
		})
	})
	t.Run("Clone", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			rec := &events{}
			logs := &logLines{}
			b := setup(t, nil, tenure.Config{TTL: ttl, Observer: rec, Logger: logs.logger()})
			l := b.acquire(t, "billing")
			res, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: "billing", Holder: l.Holder(), Token: l.Token(), Seq: l.Seq(), TTL: ttl}})
			require.NoError(t, err)
			require.True(t, res[0].Renewed)
			<-l.Done()
			synctest.Wait()
			require.Len(t, rec.of(tenure.EventCloneDetected), 1)
			require.Empty(t, rec.of(tenure.EventSuspended))
			lines := logs.lines(t, "another copy of this process")
			require.Len(t, lines, 1)
			require.Equal(t, "ERROR", lines[0]["level"])
			lostLines := logs.lines(t, "lease lost")
			require.Len(t, lostLines, 1)
			require.Equal(t, tenure.LossSeqMismatch.String(), lostLines[0]["reason"])
		})
	})
}

// downStore fails every acquisition while down is set, as a store that
// cannot be reached does.
type downStore struct {
	store.Store
	down     atomic.Bool
	attempts atomic.Int64
}

func (s *downStore) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if s.down.Load() {
		s.attempts.Add(1)
		return store.Grant{}, fmt.Errorf("%w: dial tcp 127.0.0.1:5432: connection refused", tenure.ErrUnavailable)
	}
	return s.Store.Acquire(ctx, p)
}

func TestLogsAnUnreachableStoreWhileCampaigningOncePerMinute(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		st := &downStore{Store: m}
		st.down.Store(true)
		logs := &logLines{}
		rec := &events{}
		b := setup(t, st, tenure.Config{TTL: ttl, Observer: rec, Logger: logs.logger()})

		got := make(chan *tenure.Lease, 1)
		go func() {
			l, err := b.client.Campaign(t.Context(), "billing")
			require.NoError(t, err)
			got <- l
		}()
		elapse(150 * time.Second)
		synctest.Wait()
		attempts := st.attempts.Load()
		require.Greater(t, attempts, int64(10), "the campaign keeps retrying")
		require.Len(t, rec.of(tenure.EventAcquireFailed), int(attempts), "metrics see every failure")

		first := logs.lines(t, "store unreachable while campaigning")
		require.Len(t, first, 1, "the first failure is logged")
		require.Equal(t, "billing", first[0]["lease"])
		require.Equal(t, "downStore", strings.TrimPrefix(first[0]["store"].(string), "tenure_test."))
		require.Contains(t, first[0]["err"], "connection refused")
		again := logs.lines(t, "store still unreachable")
		require.Len(t, again, 2, "then once a minute over 150 s, not once per retry")

		st.down.Store(false)
		l := <-got
		back := logs.lines(t, "store reachable again")
		require.Len(t, back, 1)
		require.EqualValues(t, attempts, back[0]["failures"])
		acquired := logs.lines(t, "lease acquired")
		require.Len(t, acquired, 1)
		require.EqualValues(t, l.Token(), acquired[0]["token"])
		require.Equal(t, l.Holder().String(), acquired[0]["holder"])
	})
}

func TestLogsRenewalFailuresOncePerChange(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newFaulty(t)
		logs := &logLines{}
		b := setup(t, st, tenure.Config{TTL: ttl, Logger: logs.logger()})
		one := b.acquire(t, "one")
		two := b.acquire(t, "two")
		st.failRenew.Store(true)
		<-one.Done()
		<-two.Done()
		synctest.Wait()
		failed := logs.lines(t, "renewal failed")
		require.Len(t, failed, 1, "one failed round, one line")
		require.EqualValues(t, 2, failed[0]["leases"])
		require.Contains(t, failed[0]["err"], "connection reset")
		require.Len(t, logs.lines(t, "lease lost"), 2)

		st.failRenew.Store(false)
		b.acquire(t, "three")
		elapse(ttl)
		synctest.Wait()
		require.Len(t, logs.lines(t, "renewal failed"), 1)
		require.Len(t, logs.lines(t, "renewals succeed again"), 1, "recovery is logged once")
	})
}

func TestQuietByDefault(t *testing.T) {
	t.Parallel()
	// The library logs only through Config.Logger: no file of the root
	// package reaches for slog's default logger or package log.
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			require.NotEqual(t, `"log"`, imp.Path.Value, "%s imports package log", f)
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "slog" {
					require.NotContains(t, []string{"Default", "SetDefault", "Debug", "Info", "Warn", "Error", "Log", "LogAttrs",
						"DebugContext", "InfoContext", "WarnContext", "ErrorContext"}, sel.Sel.Name, "%s calls slog.%s", f, sel.Sel.Name)
				}
			}
			return true
		})
	}
}

func TestTransitionRendersForPeopleAndLogs(t *testing.T) {
	t.Parallel()
	h := tenure.Holder{Label: "worker", Instance: "abc"}
	cause := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		tr   tenure.Transition
		str  string
		log  string
	}{
		{
			name: "Acquired",
			tr:   tenure.Transition{Name: "billing", Kind: tenure.TransitionAcquired, Holder: h, Token: 7},
			str:  "billing: acquired with token 7 by worker/abc",
			log:  `{"t":{"lease":"billing","kind":"acquired","token":7,"holder":"worker/abc"}}`,
		},
		{
			name: "LostWithCause",
			tr: tenure.Transition{Name: "billing", Kind: tenure.TransitionLost, Holder: h, Token: 7, Reason: tenure.LossRenewError,
				Err: &tenure.LostError{Name: "billing", Token: 7, Reason: tenure.LossRenewError, Cause: cause}},
			str: "billing: lost token 7 (worker/abc): renew error",
			log: `{"t":{"lease":"billing","kind":"lost","token":7,"holder":"worker/abc","reason":"renew error","err":"connection reset"}}`,
		},
		{
			name: "Released",
			tr:   tenure.Transition{Name: "billing", Kind: tenure.TransitionLost, Holder: h, Token: 7, Reason: tenure.LossReleased},
			str:  "billing: lost token 7 (worker/abc): released",
			log:  `{"t":{"lease":"billing","kind":"lost","token":7,"holder":"worker/abc","reason":"released"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.str, tc.tr.String())
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey {
					return slog.Attr{}
				}
				return a
			}})).Info("", "t", tc.tr)
			require.JSONEq(t, tc.log, buf.String())
		})
	}
}

func TestStoreName(t *testing.T) {
	t.Parallel()
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	require.Equal(t, "memstore", tenure.StoreName(m))
	require.Equal(t, "tenure_test.downStore", tenure.StoreName(&downStore{Store: m}))
}

func TestEventKindNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "acquired", tenure.EventAcquired.String())
	require.Equal(t, "clone detected", tenure.EventCloneDetected.String())
	require.Equal(t, "EventKind(99)", tenure.EventKind(99).String())
}

func TestTokenReadsReportNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rec := &events{}
		logs := &logLines{}
		b := setup(t, nil, tenure.Config{TTL: ttl, Observer: rec, Logger: logs.logger()})
		l := b.acquire(t, "billing")
		synctest.Wait()
		rec.mu.Lock()
		before := len(rec.all)
		rec.mu.Unlock()
		logged := len(logs.lines(t, ""))
		for range 1000 {
			require.Positive(t, l.Token())
		}
		synctest.Wait()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		require.Len(t, rec.all, before, "the hot path reports nothing")
		require.Len(t, logs.lines(t, ""), logged, "and logs nothing")
	})
}
