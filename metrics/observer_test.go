package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/httpfence"
	"github.com/tenure-dev/tenure/metrics"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// flakyStore fails renewals while failing is set.
type flakyStore struct {
	store.Store
	failing atomic.Bool
}

func (s *flakyStore) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if s.failing.Load() {
		return nil, fmt.Errorf("%w: connection reset by peer", tenure.ErrUnavailable)
	}
	return s.Store.Renew(ctx, ps)
}

// run starts a client over st reporting to m inside the bubble, and stops
// it when the test ends.
func run(t *testing.T, st store.Store, obs tenure.Observer, cfg tenure.Config) *tenure.Client {
	t.Helper()
	cfg.Observer = obs
	if cfg.TTL == 0 {
		cfg.TTL = 30 * time.Second
	}
	c, err := tenure.New(st, cfg)
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

func newMem(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestExposition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(metrics.Config{Registerer: reg, Store: "billing-db"})
		require.NoError(t, err)
		c := run(t, newMem(t), m, tenure.Config{})
		l, err := c.Acquire(t.Context(), "nightly")
		require.NoError(t, err)
		require.NoError(t, l.Release(t.Context()))
		l, err = c.Acquire(t.Context(), "nightly")
		require.NoError(t, err)
		require.Equal(t, tenure.Token(2), l.Token())

		const want = `
# HELP tenure_acquisitions_total Tenures this process began (each with a new token).
# TYPE tenure_acquisitions_total counter
tenure_acquisitions_total{lease="nightly",store="billing-db"} 2
# HELP tenure_lease_held 1 while this process holds the lease (a tenure is trusted or not yet found lost), 0 after.
# TYPE tenure_lease_held gauge
tenure_lease_held{lease="nightly",store="billing-db"} 1
# HELP tenure_lease_token The fencing token of the lease's current tenure in this process; 0 while it holds none.
# TYPE tenure_lease_token gauge
tenure_lease_token{lease="nightly",store="billing-db"} 2
# HELP tenure_losses_total Tenures this process ended, by reason (released and closed are the clean ones).
# TYPE tenure_losses_total counter
tenure_losses_total{lease="nightly",reason="released",store="billing-db"} 1
`
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
			"tenure_acquisitions_total", "tenure_lease_held", "tenure_lease_token", "tenure_losses_total"))

		holding := fmt.Sprintf(`
# HELP tenure_lease_holder_info 1 while this process holds the lease as holder (label/instance); the series goes with the tenure.
# TYPE tenure_lease_holder_info gauge
tenure_lease_holder_info{holder=%q,lease="nightly",store="billing-db"} 1
# HELP tenure_lease_transitions_total Changes of this process's leadership of the lease, either way (a grant or an end of a tenure).
# TYPE tenure_lease_transitions_total counter
tenure_lease_transitions_total{lease="nightly",store="billing-db"} 3
`, c.Holder().String())
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(holding),
			"tenure_lease_holder_info", "tenure_lease_transitions_total"))

		require.NoError(t, l.Release(t.Context()))
		const released = `
# HELP tenure_lease_transitions_total Changes of this process's leadership of the lease, either way (a grant or an end of a tenure).
# TYPE tenure_lease_transitions_total counter
tenure_lease_transitions_total{lease="nightly",store="billing-db"} 4
`
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(released),
			"tenure_lease_holder_info", "tenure_lease_transitions_total"), "the holder's series goes with its tenure")
	})
}

// tenure_build_info names the module's version and the Go version, once
// per registry.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	_, err := metrics.New(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	families, err := reg.Gather()
	require.NoError(t, err)
	var labels map[string]string
	for _, f := range families {
		if f.GetName() != "tenure_build_info" {
			continue
		}
		require.Len(t, f.GetMetric(), 1)
		require.Equal(t, 1.0, f.GetMetric()[0].GetGauge().GetValue())
		labels = map[string]string{}
		for _, lp := range f.GetMetric()[0].GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
	}
	require.Equal(t, map[string]string{"version": "(devel)", "goversion": runtime.Version()}, labels,
		"a test binary of this module reports the checkout as (devel)")
}

func TestRenewErrorsAreCounted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(metrics.Config{Registerer: reg})
		require.NoError(t, err)
		st := &flakyStore{Store: newMem(t)}
		c := run(t, st, m, tenure.Config{})
		l, err := c.Acquire(t.Context(), "billing")
		require.NoError(t, err)
		time.Sleep(11 * time.Second) // the bubble's clock: one renewal round
		synctest.Wait()
		st.failing.Store(true)
		<-l.Done()
		synctest.Wait()
		at := []string{"store", "metrics_test.flakyStore"}
		require.Equal(t, 1.0, value(t, reg, "tenure_renew_errors_total", at...))
		require.Equal(t, 2.0, value(t, reg, "tenure_renew_duration_seconds", at...), "failed rounds are timed too")
		require.Equal(t, 1.0, value(t, reg, "tenure_losses_total", append(at, "lease", "billing", "reason", "renew_error")...))
		require.Zero(t, value(t, reg, "tenure_lease_held", append(at, "lease", "billing")...))
	})
}

func TestSuspensionsAndClonesAreCounted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		m, err := metrics.New(metrics.Config{Registerer: reg})
		require.NoError(t, err)
		st := newMem(t)
		c := run(t, st, m, tenure.Config{})
		l, err := c.Acquire(t.Context(), "billing")
		require.NoError(t, err)
		// A clone restored from the same snapshot renews first.
		res, err := st.Renew(t.Context(), []store.RenewParams{{Name: "billing", Holder: l.Holder(), Token: l.Token(), Seq: l.Seq(), TTL: 30 * time.Second}})
		require.NoError(t, err)
		require.True(t, res[0].Renewed)
		<-l.Done()
		synctest.Wait()
		require.Equal(t, 1.0, value(t, reg, "tenure_clones_detected_total", "store", "memstore"))
		require.Equal(t, 1.0, value(t, reg, "tenure_losses_total", "lease", "billing", "reason", "seq_mismatch"))

		c.Revoke()
		l, err = c.Acquire(t.Context(), "other")
		require.NoError(t, err)
		c.Revoke()
		<-l.Done()
		synctest.Wait()
		require.Equal(t, 1.0, value(t, reg, "tenure_losses_total", "lease", "other", "reason", "revoked"))
		require.Zero(t, value(t, reg, "tenure_suspensions_total", "store", "memstore"), "a revoke is no suspension")
	})
}

func TestFencedCountsRefusedWrites(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	refused := &tenure.FencedError{Resource: "invoices", Offered: 3, Recorded: 5}
	got := m.Fenced(fmt.Errorf("write invoice: %w", refused))
	require.ErrorIs(t, got, tenure.ErrFenced, "the error comes back unchanged")
	require.NoError(t, m.Fenced(nil))
	other := errors.New("connection reset")
	require.Equal(t, other, m.Fenced(other))
	require.Equal(t, 1.0, value(t, reg, "tenure_fence_refused_total", "resource", "invoices"))
	count, err := testutil.GatherAndCount(reg, "tenure_fence_refused_total")
	require.NoError(t, err)
	require.Equal(t, 1, count, "only the refusal is counted")
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	_, err := metrics.New(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	_, err = metrics.New(metrics.Config{Registerer: reg})
	require.ErrorIs(t, err, tenure.ErrInvalid)
	require.ErrorContains(t, err, "share it among clients")

	fresh := prometheus.NewRegistry()
	_, err = metrics.New(metrics.Config{Registerer: fresh, RenewBuckets: []float64{1, 0.5}})
	require.ErrorIs(t, err, tenure.ErrInvalid)
	require.ErrorContains(t, err, "RenewBuckets")
	_, err = metrics.New(metrics.Config{Registerer: fresh, WaitBuckets: []float64{}})
	require.ErrorContains(t, err, "WaitBuckets")
	families, err := fresh.Gather()
	require.NoError(t, err)
	require.Empty(t, families, "a refused Config registers nothing")
	_, err = metrics.New(metrics.Config{Registerer: fresh})
	require.NoError(t, err, "and leaves the registry usable")
}

func TestReasonLabels(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for r := tenure.LossExpiredLocally; r <= tenure.LossStoreClockAhead; r++ {
		label := metrics.Reason(r)
		require.Regexp(t, `^[a-z][a-z_]*[a-z]$`, label, r.String())
		require.NotContains(t, label, "lossreason", "every reason has a label of its own: %s", r)
		require.False(t, seen[label], "labels are distinct")
		seen[label] = true
	}
	require.Equal(t, "store_clock_ahead", metrics.Reason(tenure.LossStoreClockAhead))
	require.Equal(t, "lossreason_99", metrics.Reason(99), "a reason from a newer tenure still gets a label")
}

// TestFencedCountsHTTPFenceRefusals wraps httpfence's fence store as the
// package documentation says, with the real middleware in front of a
// handler.
func TestFencedCountsHTTPFenceRefusals(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	st := httpfence.NewMemory()
	mw, err := httpfence.Middleware(httpfence.Config{
		Store: httpfence.FenceFunc(func(ctx context.Context, res string, tok tenure.Token) error {
			return m.Fenced(st.Fence(ctx, res, tok))
		}),
		Resource: func(*http.Request) string { return "reports" },
	})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	put := func(tok tenure.Token) int {
		req := httptest.NewRequest(http.MethodPut, "/reports", nil)
		require.NoError(t, httpfence.SetToken(req, tok))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	require.Equal(t, http.StatusOK, put(8))
	require.Zero(t, value(t, reg, "tenure_fence_refused_total", "resource", "reports"))
	require.Equal(t, http.StatusConflict, put(7))
	require.Equal(t, http.StatusConflict, put(6))
	require.Equal(t, 2.0, value(t, reg, "tenure_fence_refused_total", "resource", "reports"))
}
