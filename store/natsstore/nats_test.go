package natsstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// eventTimeout bounds every wait for an event.
const eventTimeout = 15 * time.Second

func acquire(t *testing.T, s *natsstore.Store, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.NoError(t, err, "acquire %q", name)
	return g
}

func TestConfig(t *testing.T) {
	t.Parallel()
	js, err := jetstream.New(natsserver.SharedNats(t).Conn(t))
	require.NoError(t, err)
	for name, cfg := range map[string]natsstore.Config{
		"BadBucket":      {Bucket: "a.b"},
		"SpaceBucket":    {Bucket: "a b"},
		"TooManyCopies":  {Replicas: 7},
		"NegativeCopies": {Replicas: -1},
	} {
		_, err := natsstore.Open(t.Context(), js, cfg)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorIs(t, natsstore.Migrate(t.Context(), js, cfg), store.ErrInvalid, name)
	}
	_, err = natsstore.Open(t.Context(), nil, natsstore.Config{})
	require.ErrorIs(t, err, store.ErrInvalid, "nil JetStream")

	_, err = natsstore.Open(t.Context(), js, natsstore.Config{Bucket: "absent_" + testutil.UniqueName(t)[:8]})
	require.ErrorIs(t, err, store.ErrNotMigrated)
	require.ErrorContains(t, err, "tenure migrate")
}

// TestUnsafeBuckets: Open refuses buckets that could hand a token out
// twice or end a lease before its TTL, naming the problem.
func TestUnsafeBuckets(t *testing.T) {
	t.Parallel()
	js, err := jetstream.New(natsserver.SharedNats(t).Conn(t))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		cfg  jetstream.KeyValueConfig
		want string
	}{
		"Memory":    {cfg: jetstream.KeyValueConfig{Storage: jetstream.MemoryStorage, LimitMarkerTTL: time.Second}, want: "in memory"},
		"NoTTLs":    {cfg: jetstream.KeyValueConfig{}, want: "no per-key TTLs"},
		"History":   {cfg: jetstream.KeyValueConfig{History: 2, LimitMarkerTTL: time.Second}, want: "history of 2"},
		"BucketTTL": {cfg: jetstream.KeyValueConfig{TTL: time.Hour, LimitMarkerTTL: time.Second}, want: "expires every key"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Bucket = "unsafe_" + name
			_, err := js.CreateKeyValue(t.Context(), tc.cfg)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, js.DeleteKeyValue(context.Background(), tc.cfg.Bucket)) })

			_, err = natsstore.Open(t.Context(), js, natsstore.Config{Bucket: tc.cfg.Bucket})
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			err = natsstore.Migrate(t.Context(), js, natsstore.Config{Bucket: tc.cfg.Bucket})
			require.ErrorIs(t, err, store.ErrInvalid, "Migrate leaves an existing bucket alone and checks it")
		})
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	h := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}
	js, cfg := h.Bucket(t)
	require.NoError(t, natsstore.Migrate(t.Context(), js, cfg), "a second migration finds the bucket as it made it")
	s, err := natsstore.Open(t.Context(), js, cfg)
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestTTLRounding: nats-server keeps message TTLs in whole seconds, so a
// TTL is rounded up and the granted time is what the store reports.
func TestTTLRounding(t *testing.T) {
	t.Parallel()
	s, _ := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}.New(t)
	h := testutil.Holder(t, "holder")
	g := acquire(t, s, testutil.UniqueName(t), h, 1200*time.Millisecond)
	require.Equal(t, 2*time.Second, g.Remaining)
	rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: 2500 * time.Millisecond}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.Equal(t, 3*time.Second, rs[0].Grant.Remaining)

	_, err = s.Acquire(t.Context(), store.AcquireParams{Name: testutil.UniqueName(t), Holder: h, TTL: 999 * time.Millisecond})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "nats-server's minimum")
	require.Equal(t, natsstore.MinTTL, store.MinTTLOf(s))
}

// TestTokensSurvive: neither a purge of the lease's keys (its last
// token), nor a purge of the whole stream, nor a restart of the server
// lowers the token of the next tenure.
func TestTokensSurvive(t *testing.T) {
	t.Parallel()
	srv := natsserver.OwnNats(t)
	h := natsserver.NatsHarness{Server: srv}
	js, cfg := h.Bucket(t)
	s, err := natsstore.Open(t.Context(), js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	kv, err := js.KeyValue(t.Context(), cfg.Bucket)
	require.NoError(t, err)
	stream, err := js.Stream(t.Context(), "KV_"+cfg.Bucket)
	require.NoError(t, err)
	name := testutil.UniqueName(t)
	holder := testutil.Holder(t, "holder")

	last := acquire(t, s, name, holder, time.Minute)
	steps := map[string]func(){
		"PurgeKeys": func() {
			keys, err := kv.Keys(t.Context())
			require.NoError(t, err)
			for _, k := range keys {
				require.NoError(t, kv.Purge(t.Context(), k))
			}
		},
		"PurgeStream": func() { require.NoError(t, stream.Purge(t.Context())) },
		"Restart":     func() { require.NoError(t, srv.Restart(t.Context())) },
	}
	for _, step := range []string{"PurgeKeys", "PurgeStream", "Restart"} {
		steps[step]()
		require.Eventually(t, func() bool {
			_, err := s.Get(t.Context(), name)
			return !errors.Is(err, store.ErrUnavailable)
		}, eventTimeout, 10*time.Millisecond, "%s: the server answers", step)
		g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: holder, TTL: time.Minute})
		if err != nil {
			var held *store.HeldError
			require.ErrorAs(t, err, &held, step)
			require.Equal(t, last.Token, held.Token, "%s: the lease survived with its token", step)
			require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: name, Holder: holder, Token: held.Token}))
			g = acquire(t, s, name, holder, time.Minute)
		}
		require.Greater(t, g.Token, last.Token, "%s: a later tenure gets a greater token", step)
		last = g
	}
}

// TestNotifyOnExpiry: the marker the server leaves when a lease's TTL runs
// out is announced, so a follower need not wait for the remaining time it
// was told (the full TTL).
func TestNotifyOnExpiry(t *testing.T) {
	t.Parallel()
	s, _ := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}.New(t)
	name := testutil.UniqueName(t)
	var mu sync.Mutex
	var names []string
	subscribed := make(chan struct{}, 1)
	heard := make(chan struct{}, 1)
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(nt store.Notice) {
			n := nt.Name
			if n == "" {
				select {
				case subscribed <- struct{}{}:
				default:
				}
				return
			}
			mu.Lock()
			names = append(names, n)
			mu.Unlock()
			if n == name {
				select {
				case heard <- struct{}{}:
				default:
				}
			}
		})
	}()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	<-subscribed
	g := acquire(t, s, name, testutil.Holder(t, "holder"), natsstore.MinTTL)
	<-heard // the acquisition
	rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: natsstore.MinTTL}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	select {
	case <-heard:
	case <-time.After(eventTimeout):
		t.Fatal("no notification of the expiry")
	}
	r, err := s.Get(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, r.State)
	mu.Lock()
	require.Equal(t, []string{name, name}, names, "the acquisition and the expiry, not the renewal")
	mu.Unlock()
}
