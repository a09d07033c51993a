package storeurl_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/redisstore"
)

func TestParseServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		want      storeurl.Target // Kind, Display and the store's fields
	}{
		{name: "Redis", raw: "redis://127.0.0.1:6379/2",
			want: storeurl.Target{Kind: storeurl.Redis, Display: "redis://127.0.0.1:6379/2"}},
		{name: "RedisPasswordAndPrefix", raw: "redis://:s3cr3t@cache:6380/0?tenure_prefix=jobs:&dial_timeout=2s",
			want: storeurl.Target{Kind: storeurl.Redis, Display: "redis://:xxxxx@cache:6380/0?tenure_prefix=jobs:&dial_timeout=2s",
				Redis: redisstore.Config{KeyPrefix: "jobs:"}}},
		{name: "RedisTLS", raw: "rediss://alice:s3cr3t@cache:6380",
			want: storeurl.Target{Kind: storeurl.Redis, Display: "rediss://alice:xxxxx@cache:6380"}},
		{name: "Etcd", raw: "etcd://10.0.0.1:2379",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://10.0.0.1:2379", Endpoints: []string{"10.0.0.1:2379"}}},
		{name: "EtcdSeveralWithDefaults", raw: "etcd://alice:s3cr3t@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://alice:xxxxx@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
				Endpoints: []string{"e1:2379", "e2:2380", "[::1]:2381", "[::2]:2379"}, Etcd: etcdstore.Config{KeyPrefix: "jobs/"}}},
		{name: "EtcdDefaultEndpoint", raw: "ETCD://",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://", Endpoints: []string{"127.0.0.1:2379"}}},
		{name: "Consul", raw: "consul://127.0.0.1:8500",
			want: storeurl.Target{Kind: storeurl.Consul, Display: "consul://127.0.0.1:8500", Endpoints: []string{"127.0.0.1:8500"}}},
		{name: "ConsulParameters", raw: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
			want: storeurl.Target{Kind: storeurl.Consul, Display: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
				Endpoints: []string{"agent:8500"}, Consul: consulstore.Config{KeyPrefix: "jobs/", MinSessionTTL: time.Second, LockDelay: 15 * time.Second}}},
		{name: "ConsulDefaultAgent", raw: "consul://",
			want: storeurl.Target{Kind: storeurl.Consul, Display: "consul://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, tc.want.Kind, got.Kind)
			require.Equal(t, tc.want.Display, got.Display)
			require.Equal(t, tc.want.Endpoints, got.Endpoints)
			require.Equal(t, tc.want.Redis, got.Redis)
			require.Equal(t, tc.want.Etcd, got.Etcd)
			require.Equal(t, tc.want.Consul, got.Consul)
			require.NotContains(t, got.Display, "s3cr3t")
			if strings.Contains(tc.raw, "s3cr3t") {
				require.Equal(t, "a xxxxx b", got.Redact("a s3cr3t b"))
			}
		})
	}
}

func TestRegistryConfig(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("postgres://h/db?tenure_schema=ops&tenure_prefix=job_")
	require.NoError(t, err)
	cfg, err := tg.RegistryConfig()
	require.NoError(t, err)
	require.Equal(t, "ops", cfg.Schema)
	require.Equal(t, "job_", cfg.TablePrefix)

	for _, raw := range []string{"sqlite:/x.db", "redis://h", "etcd://h", "consul://h"} {
		tg, err := storeurl.Parse(raw)
		require.NoError(t, err)
		_, err = tg.RegistryConfig()
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "the fleet registry (tenure agents, tenure owner) lives in PostgreSQL, not in the "+tg.Kind.Name()+" store "+tg.Display)
	}

	// A prefix pgstore takes but the registry's longer names do not fit.
	_, err = storeurl.Parse("postgres://h/db?tenure_prefix=" + strings.Repeat("p", 45))
	require.ErrorIs(t, err, store.ErrInvalid)
}

func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// withParam adds key=value to the query of raw.
func withParam(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// serveAndRelease checks that an opened store grants, reports and releases
// a lease, and that migrate has nothing to do.
func serveAndRelease(t *testing.T, o *storeurl.Opened, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	h := testutil.Holder(t, "t")
	g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: ttl})
	require.NoError(t, err)
	require.Positive(t, g.Token)
	rec, err := o.Store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, rec.State)
	require.Equal(t, h, rec.Holder)
	require.NoError(t, o.Store.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}))
	msg, err := o.Migrate(ctx)
	require.NoError(t, err)
	require.Contains(t, msg, "keeps no schema: nothing to migrate")
	_, err = o.Registry()
	require.ErrorIs(t, err, store.ErrInvalid)
}

func TestOpenRedis(t *testing.T) {
	t.Parallel()
	client := testserver.RedisClient(t)
	prefix := testserver.RedisPrefix(t, client)

	tg, err := storeurl.Parse(withParam(t, testserver.RedisURL(), storeurl.ParamPrefix, prefix))
	require.NoError(t, err)
	require.Equal(t, prefix, tg.Redis.KeyPrefix)
	o, err := tg.Open(t.Context(), storeurl.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, time.Second)
	require.NoError(t, o.Close())
	n, err := client.Exists(t.Context(), prefix+"token").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the store did not use the URL's key prefix")

	tg, err = storeurl.Parse("redis://:Sup3rSecret@" + closedPort(t))
	require.NoError(t, err)
	_, err = tg.Open(t.Context(), storeurl.Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach Redis at redis://:xxxxx@")
	require.NotContains(t, err.Error(), "Sup3rSecret")
}

func TestOpenEtcd(t *testing.T) {
	t.Parallel()
	srv := testserver.OwnEtcd(t)
	prefix := testutil.UniqueName(t) + "/"
	tg, err := storeurl.Parse("etcd://" + strings.TrimPrefix(srv.Endpoint, "http://") + "?tenure_prefix=" + prefix)
	require.NoError(t, err)
	o, err := tg.Open(t.Context(), storeurl.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, etcdstore.MinTTL)
	require.NoError(t, o.Close())

	tg, err = storeurl.Parse("etcd://alice:Sup3rSecret@" + closedPort(t))
	require.NoError(t, err)
	_, err = tg.Open(t.Context(), storeurl.Options{ConnectTimeout: time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach etcd at etcd://alice:xxxxx@")
	require.NotContains(t, err.Error(), "Sup3rSecret")
}

func TestOpenConsul(t *testing.T) {
	t.Parallel()
	agent := testserver.OwnConsul(t)
	prefix := testutil.UniqueName(t) + "/"
	tg, err := storeurl.Parse("consul://" + agent.HTTPAddr + "?tenure_session_ttl_min=500ms&tenure_prefix=" + prefix)
	require.NoError(t, err)
	o, err := tg.Open(t.Context(), storeurl.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, time.Second)
	require.NoError(t, o.Close())

	tg, err = storeurl.Parse("consul://" + closedPort(t))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = tg.Open(ctx, storeurl.Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach Consul at consul://")
}
