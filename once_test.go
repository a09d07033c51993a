package tenure_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// onceClient starts a client named label over st and stops it at cleanup.
func onceClient(t *testing.T, st store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(st, tenure.Config{Label: label})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-ran)
	})
	return c
}

func newMemstore(t *testing.T) *memstore.Store {
	t.Helper()
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func TestOnceRunsOncePerWindow(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	first, late := onceClient(t, m, "first"), onceClient(t, m, "late")
	day := tenure.OnceWindow{Key: "2026-12-04"}

	var runs atomic.Int32
	var ranWith tenure.Token
	require.NoError(t, first.Once(t.Context(), "billing", day, func(_ context.Context, l *tenure.Lease) error {
		runs.Add(1)
		ranWith = l.Token()
		return nil
	}))
	err := late.Once(t.Context(), "billing", day, func(context.Context, *tenure.Lease) error {
		runs.Add(1)
		return nil
	})
	require.ErrorIs(t, err, tenure.ErrWindowDone)
	var done *tenure.WindowDoneError
	require.ErrorAs(t, err, &done)
	require.Equal(t, store.WindowCompleted, done.Window.State)
	require.Equal(t, first.Holder(), done.Window.Holder, "the refusal names who ran it")
	require.Equal(t, ranWith, done.Window.Token, "and with which token")
	require.False(t, done.Window.FinishedAt.IsZero(), "and when")
	require.Contains(t, err.Error(), `window "2026-12-04" of "billing" already ran: completed by first/`)
	require.Equal(t, int32(1), runs.Load())

	require.NoError(t, late.Once(t.Context(), "billing", tenure.OnceWindow{Key: "2026-12-05"}, func(context.Context, *tenure.Lease) error {
		runs.Add(1)
		return nil
	}), "the next window runs")
	require.Equal(t, int32(2), runs.Load())
}

// Ten clients fire the same window at once: one runs it, the others wait
// for the lease and then find the window done.
func TestOnceTenAtOnce(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	var runs atomic.Int32
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range errs {
		c := onceClient(t, m, "worker")
		wg.Go(func() {
			errs[i] = c.Once(t.Context(), "billing", tenure.OnceWindow{Period: 24 * time.Hour}, func(context.Context, *tenure.Lease) error {
				runs.Add(1)
				return nil
			})
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), runs.Load(), "exactly one run per window")
	refused := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, tenure.ErrWindowDone)
			refused++
		}
	}
	require.Equal(t, 9, refused)
}

func TestOnceFailedRun(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	c := onceClient(t, m, "worker")
	w := tenure.OnceWindow{Key: "batch-7"}
	boom := errors.New("the job failed")
	err := c.Once(t.Context(), "import", w, func(context.Context, *tenure.Lease) error { return boom })
	require.ErrorIs(t, err, boom, "Once returns the job's error")

	err = c.Once(t.Context(), "import", w, func(context.Context, *tenure.Lease) error {
		t.Error("a failed window ran again without RetryFailed")
		return nil
	})
	var done *tenure.WindowDoneError
	require.ErrorAs(t, err, &done)
	require.Equal(t, store.WindowFailed, done.Window.State)
	require.Contains(t, err.Error(), "already ran and failed")

	w.RetryFailed = true
	ran := false
	require.NoError(t, c.Once(t.Context(), "import", w, func(context.Context, *tenure.Lease) error {
		ran = true
		return nil
	}))
	require.True(t, ran, "RetryFailed runs a failed window again")
	rec, err := m.GetWindow(t.Context(), "import", "batch-7")
	require.NoError(t, err)
	require.Equal(t, store.WindowCompleted, rec.State)
	require.Equal(t, int64(2), rec.Attempts)
}

// windowless hides the store's [store.Windower].
type windowless struct{ store.Store }

func TestOnceRefusesBadInput(t *testing.T) {
	t.Parallel()
	m := newMemstore(t)
	c := onceClient(t, windowless{m}, "worker")
	never := func(context.Context, *tenure.Lease) error {
		t.Error("fn ran")
		return nil
	}
	err := c.Once(t.Context(), "billing", tenure.OnceWindow{Key: "k"}, never)
	require.ErrorIs(t, err, tenure.ErrInvalid)
	require.ErrorContains(t, err, "records no windows")

	c = onceClient(t, m, "worker")
	for _, w := range []tenure.OnceWindow{{}, {Key: "k", Period: time.Hour}, {Period: time.Millisecond}, {Key: "@1+1"}} {
		err := c.Once(t.Context(), "billing", w, never)
		require.ErrorIs(t, err, tenure.ErrInvalid, "%+v", w)
	}
	_, err = m.Get(t.Context(), "billing")
	require.ErrorIs(t, err, store.ErrNotFound, "refused input takes no lease")
}
