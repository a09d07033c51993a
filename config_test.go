package tenure_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  tenure.Config
		msg  string // empty: valid
	}{
		{"ZeroIsDefaults", tenure.Config{}, ""},
		{"ShortTTL", tenure.Config{TTL: 400 * time.Millisecond}, "TTL (400ms) must be at least 500ms"},
		{"RenewTooSlow", tenure.Config{TTL: 10 * time.Second, RenewInterval: 6 * time.Second}, "RenewInterval (6s) must be at most TTL/2 (5s)"},
		{"NegativeRenew", tenure.Config{RenewInterval: -time.Second}, "RenewInterval (-1s) must be positive"},
		{"GraceTooLong", tenure.Config{TTL: 30 * time.Second, Grace: 20 * time.Second}, "Grace (20s) leaves no time to renew"},
		{"GraceFits", tenure.Config{TTL: 30 * time.Second, Grace: 10 * time.Second}, ""},
		{"NegativeGrace", tenure.Config{Grace: -time.Second}, "Grace (-1s) must not be negative"},
		{"ToleranceAboveMargin", tenure.Config{TTL: 10 * time.Second, SuspendTolerance: time.Second}, "SuspendTolerance (1s) must be below TTL/10 (1s)"},
		{"NegativeProgress", tenure.Config{ProgressTimeout: -time.Second}, "ProgressTimeout (-1s) must not be negative"},
		{"ControlCharInLabel", tenure.Config{Label: "billing\nworker"}, "Label \"billing\\nworker\" contains the control character U+000A"},
		{"LongLabel", tenure.Config{Label: string(make([]byte, 200))}, "Label is 200 bytes long"},
		{"Payload", tenure.Config{Payload: "10.0.0.7:8443"}, ""},
		{"LongPayload", tenure.Config{Payload: strings.Repeat("p", store.MaxPayloadLen+1)}, "payload is 1025 bytes long; the maximum is 1024 (Config.Payload)"},
		{"ControlCharInPayload", tenure.Config{Payload: "a\x00b"}, "payload \"a\\x00b\" contains the control character U+0000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memstore.New(memstore.Config{})
			t.Cleanup(func() { _ = st.Close() })
			c, err := tenure.New(st, tc.cfg)
			if tc.msg == "" {
				require.NoError(t, err)
				require.NotNil(t, c)
				return
			}
			require.ErrorIs(t, err, tenure.ErrInvalid)
			require.ErrorContains(t, err, tc.msg)
			require.Nil(t, c)
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = st.Close() })
	c, err := tenure.New(st, tenure.Config{})
	require.NoError(t, err)
	cfg := c.Config()
	require.Equal(t, 30*time.Second, cfg.TTL)
	require.Equal(t, 10*time.Second, cfg.RenewInterval)
	require.Equal(t, 1500*time.Millisecond, cfg.SuspendTolerance)
	require.NotEmpty(t, cfg.Label)
	require.Len(t, c.Holder().Instance, 26)
}

func TestNewRefusesNilStore(t *testing.T) {
	t.Parallel()
	_, err := tenure.New(nil, tenure.Config{})
	require.ErrorIs(t, err, tenure.ErrInvalid)
}

// floored is a memstore that, like etcd, cannot keep leases under 2 s.
type floored struct{ *memstore.Store }

func (floored) MinTTL() time.Duration { return 2 * time.Second }

func TestNewRefusesTTLBelowTheStoresFloor(t *testing.T) {
	t.Parallel()
	st := floored{memstore.New(memstore.Config{})}
	t.Cleanup(func() { _ = st.Close() })
	_, err := tenure.New(st, tenure.Config{TTL: time.Second})
	require.ErrorIs(t, err, tenure.ErrInvalid)
	require.ErrorContains(t, err, "below the store's minimum lease of 2s")
	_, err = tenure.New(st, tenure.Config{TTL: 2 * time.Second})
	require.NoError(t, err)
}

func TestValidateFillsDefaultsFirst(t *testing.T) {
	t.Parallel()
	require.NoError(t, tenure.Config{}.Validate())
	err := tenure.Config{TTL: 3 * time.Second, RenewInterval: 2 * time.Second}.Validate()
	require.ErrorIs(t, err, tenure.ErrInvalid)
	require.ErrorContains(t, err, "RenewInterval (2s) must be at most TTL/2 (1.5s)")
}

func TestCampaignWithoutRunReturnsWhenCtxIsDone(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = st.Close() })
	c, err := tenure.New(st, tenure.Config{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.Campaign(ctx, "billing")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "Run never started")
}

// A campaign that began before Run started waits on as long as it needs
// once Run is running: the one-TTL limit is for a Run that never starts.
func TestCampaignBeforeRunStartsWaitsOn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.Config{})
		defer func() { _ = mem.Close() }()
		other := store.Holder{Label: "other", Instance: "elsewhere"}
		held, err := mem.Acquire(t.Context(), store.AcquireParams{Name: "billing", Holder: other, TTL: time.Hour})
		require.NoError(t, err)
		st := &countingStore{Store: mem}
		c, err := tenure.New(st, tenure.Config{TTL: 3 * time.Second})
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			l, err := c.Campaign(t.Context(), "billing")
			if err == nil {
				err = l.Release(t.Context())
			}
			got <- err
		}()
		time.Sleep(time.Second) // the bubble's clock: Run starts a second after the campaign
		ctx, cancel := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- c.Run(ctx) }()
		time.Sleep(time.Minute) // the bubble's clock: twenty TTLs
		synctest.Wait()
		require.Empty(t, got, "still campaigning a minute later, with Run running")
		require.EqualValues(t, 1, st.acquires.Load(), "one attempt, then a wait for the holder's expiry: the campaign was not restarted")
		require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: "billing", Holder: other, Token: held.Token}))
		require.NoError(t, <-got)
		cancel()
		require.NoError(t, <-ran)
	})
}

// countingStore counts acquisition attempts. It announces nothing (it is
// no store.Notifier), so a campaign's attempts are its own schedule's.
type countingStore struct {
	store.Store
	acquires atomic.Int64
}

func (s *countingStore) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	s.acquires.Add(1)
	return s.Store.Acquire(ctx, p)
}

func TestCampaignWithoutRunFailsAfterOneTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New(memstore.Config{})
		defer func() { _ = st.Close() }()
		c, err := tenure.New(st, tenure.Config{TTL: 3 * time.Second})
		require.NoError(t, err)
		start := time.Now()
		err = c.Do(t.Context(), "billing", func(context.Context, *tenure.Lease) error {
			return errors.New("ran without a running client")
		})
		require.ErrorIs(t, err, tenure.ErrNotRunning)
		require.ErrorContains(t, err, "call go client.Run(ctx)")
		require.Equal(t, 3*time.Second, time.Since(start))
	})
}
