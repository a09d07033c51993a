package alwaysleader_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/alwaysleader"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

const reason = "the job is an idempotent upsert; running it twice is harmless"

func newStore(t *testing.T) *alwaysleader.Store {
	t.Helper()
	s, err := alwaysleader.New(reason)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("ReasonKeptTrimmed", func(t *testing.T) {
		t.Parallel()
		s, err := alwaysleader.New("  \t" + reason + "\n ")
		require.NoError(t, err)
		require.Equal(t, reason, s.Reason())
	})

	for name, tc := range map[string]struct {
		reason string
		want   string
	}{
		"Empty":        {"", "say in a sentence why"},
		"Whitespace":   {" \t\n ", "no mutual exclusion and no fencing"},
		"TooLong":      {strings.Repeat("x", alwaysleader.MaxReasonLen+1), "maximum is 1024"},
		"BadUTF8":      {"idempotent \xff", "not valid UTF-8"},
		"TwoLines":     {"idempotent\nreally", "one line"},
		"ControlChars": {"idempotent\x00", "control character"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := alwaysleader.New(tc.reason)
			require.Nil(t, s)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "alwaysleader: "), err.Error())
		})
	}
}

func TestStore(t *testing.T) {
	t.Parallel()

	t.Run("EveryAcquireSucceeds", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
		ga, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: a, TTL: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.Grant{Name: "job", Holder: a, Token: alwaysleader.Token, Seq: 1, Remaining: time.Minute}, ga)

		for _, h := range []store.Holder{b, a, b} {
			g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
			require.NoError(t, err, "acquire by %s while held", h)
			require.Equal(t, h, g.Holder)
			require.Equal(t, alwaysleader.Token, g.Token, "the token is constant")
			require.Equal(t, int64(1), g.Seq)
		}
	})

	t.Run("PayloadOfLastAcquirer", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		for _, payload := range []string{"a:1", "b:2"} {
			g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "h"), TTL: time.Minute, Payload: payload})
			require.NoError(t, err)
			require.Equal(t, payload, g.Payload)
		}
		r, err := s.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, "b:2", r.Payload, "Get shows the last acquirer's payload")
	})

	t.Run("RacingAcquirersAllWin", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		const racers = 16
		errs := make(chan error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			h := testutil.Holder(t, "racer")
			wg.Go(func() {
				_, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Duration(i+1) * time.Second})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})

	t.Run("RenewAlwaysRenews", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		a := testutil.Holder(t, "a")
		g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: a, TTL: time.Minute})
		require.NoError(t, err)
		stranger := testutil.Holder(t, "stranger")

		rs, err := s.Renew(ctx, []store.RenewParams{
			{Name: "job", Holder: a, Token: g.Token, Seq: g.Seq, TTL: 2 * time.Minute},
			{Name: "never-acquired", Holder: stranger, Token: 7, Seq: 41, TTL: time.Second},
		})
		require.NoError(t, err)
		require.Equal(t, []store.RenewResult{
			{Renewed: true, Grant: store.Grant{Name: "job", Holder: a, Token: alwaysleader.Token, Seq: 2, Remaining: 2 * time.Minute}},
			{Renewed: true, Grant: store.Grant{Name: "never-acquired", Holder: stranger, Token: alwaysleader.Token, Seq: 42, Remaining: time.Second}},
		}, rs)

		rs, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: a, Token: g.Token, Seq: 1, TTL: time.Minute}})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed, "a stale seq renews too: there is no chain")

		rs, err = s.Renew(ctx, nil)
		require.NoError(t, err)
		require.Empty(t, rs)
	})

	t.Run("ReleaseAlwaysSucceeds", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		a, b := testutil.Holder(t, "a"), testutil.Holder(t, "b")
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: "never-acquired", Holder: a, Token: 3}))
		_, err := s.Get(ctx, "never-acquired")
		require.ErrorIs(t, err, store.ErrNotFound, "a release creates nothing")

		_, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: a, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: "job", Holder: b, Token: alwaysleader.Token}))
		r, err := s.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, store.StateHeld, r.State, "another holder's release leaves the last tenure alone")

		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: "job", Holder: a, Token: alwaysleader.Token}))
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: "job", Holder: a, Token: alwaysleader.Token}), "twice")
		r, err = s.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, store.StateReleased, r.State)
		require.Equal(t, a, r.Holder, "the record names the last holder")
		require.Zero(t, r.Remaining)
	})

	t.Run("GetReportsState", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		_, err := s.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrNotFound)

		a := testutil.Holder(t, "a")
		before := time.Now()
		_, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: a, TTL: time.Minute})
		require.NoError(t, err)
		r, err := s.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, store.StateHeld, r.State)
		require.Equal(t, a, r.Holder)
		require.Equal(t, alwaysleader.Token, r.Token)
		require.Equal(t, int64(1), r.Seq)
		require.Greater(t, r.Remaining, 59*time.Second)
		require.LessOrEqual(t, r.Remaining, time.Minute)
		require.False(t, r.AcquiredAt.Before(before.Round(0)))

		short, err := s.Acquire(ctx, store.AcquireParams{Name: "short", Holder: a, TTL: 20 * time.Millisecond})
		require.NoError(t, err)
		time.Sleep(short.Remaining) // waiting for the store's clock to pass the TTL is the event itself
		r, err = s.Get(ctx, "short")
		require.NoError(t, err)
		require.Equal(t, store.StateExpired, r.State)
		require.Zero(t, r.Remaining)
		_, err = s.Acquire(ctx, store.AcquireParams{Name: "short", Holder: testutil.Holder(t, "b"), TTL: time.Minute})
		require.NoError(t, err)
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		rs, err := s.List(ctx)
		require.NoError(t, err)
		require.Empty(t, rs)
		a := testutil.Holder(t, "a")
		for _, name := range []string{"c", "a", "b"} {
			_, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: time.Minute})
			require.NoError(t, err)
		}
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: "b", Holder: a, Token: alwaysleader.Token}))
		rs, err = s.List(ctx)
		require.NoError(t, err)
		require.Len(t, rs, 3)
		for i, want := range []struct {
			name  string
			state store.State
		}{{"a", store.StateHeld}, {"b", store.StateReleased}, {"c", store.StateHeld}} {
			require.Equal(t, want.name, rs[i].Name)
			require.Equal(t, want.state, rs[i].State, rs[i].Name)
		}
	})

	t.Run("Input", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := t.Context()
		h := testutil.Holder(t, "a")
		long := strings.Repeat("n", store.MaxNameLen+1)
		for name, call := range map[string]func() error{
			"AcquireEmptyName": func() error {
				_, err := s.Acquire(ctx, store.AcquireParams{Holder: h, TTL: time.Second})
				return err
			},
			"AcquireNoHolder": func() error {
				_, err := s.Acquire(ctx, store.AcquireParams{Name: "job", TTL: time.Second})
				return err
			},
			"AcquireZeroTTL": func() error {
				_, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h})
				return err
			},
			"RenewZeroSeq": func() error {
				_, err := s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: 1, TTL: time.Second}})
				return err
			},
			"RenewDuplicate": func() error {
				p := store.RenewParams{Name: "job", Holder: h, Token: 1, Seq: 1, TTL: time.Second}
				_, err := s.Renew(ctx, []store.RenewParams{p, p})
				return err
			},
			"ReleaseZeroToken": func() error {
				return s.Release(ctx, store.ReleaseParams{Name: "job", Holder: h})
			},
			"GetLongName": func() error {
				_, err := s.Get(ctx, long)
				return err
			},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				err := call()
				require.ErrorIs(t, err, store.ErrInvalid)
				require.True(t, strings.HasPrefix(err.Error(), "alwaysleader: "), err.Error())
			})
		}
		// Nothing was changed by the refused calls.
		_, err := s.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("DoneContext", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Second})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorIs(t, err, context.Canceled)
		_, err = s.Get(t.Context(), "job")
		require.ErrorIs(t, err, store.ErrNotFound, "nothing was attempted")
	})

	t.Run("Close", func(t *testing.T) {
		t.Parallel()
		s, err := alwaysleader.New(reason)
		require.NoError(t, err)
		ctx := t.Context()
		h := testutil.Holder(t, "a")
		_, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close(), "twice")

		_, err = s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.ErrorIs(t, err, store.ErrClosed, "Acquire")
		_, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: 1, Seq: 1, TTL: time.Minute}})
		require.ErrorIs(t, err, store.ErrClosed, "Renew")
		require.ErrorIs(t, s.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: 1}), store.ErrClosed, "Release")
		_, err = s.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrClosed, "Get")
		_, err = s.List(ctx)
		require.ErrorIs(t, err, store.ErrClosed, "List")
		require.Equal(t, reason, s.Reason(), "the reason outlives Close")
	})
}

func TestZeroStore(t *testing.T) {
	t.Parallel()
	var s alwaysleader.Store
	_, err := s.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Second})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "requires a reason")
}

// TestClients runs real clients on one store: both lead at once, and a
// lease taken again after Do gets the same token.
func TestClients(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	client := func(label string) *tenure.Client {
		c, err := tenure.New(s, tenure.Config{Label: label, TTL: time.Second})
		require.NoError(t, err)
		wg.Go(func() { _ = c.Run(ctx) })
		return c
	}
	a, b := client("a"), client("b")

	la, err := a.Acquire(ctx, "job")
	require.NoError(t, err)
	lb, err := b.Acquire(ctx, "job")
	require.NoError(t, err, "the second client leads too")
	require.Equal(t, alwaysleader.Token, la.Token())
	require.Equal(t, alwaysleader.Token, lb.Token())
	require.NoError(t, la.Release(ctx))
	require.NoError(t, lb.Release(ctx))

	runs := 0
	for range 2 {
		require.NoError(t, a.Do(ctx, "job", func(_ context.Context, l *tenure.Lease) error {
			runs++
			require.Equal(t, alwaysleader.Token, l.Token())
			return nil
		}))
	}
	require.Equal(t, 2, runs)
}
