package storeopen_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

func TestRegistryConfig(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("postgres://h/db?tenure_schema=ops&tenure_prefix=job_")
	require.NoError(t, err)
	cfg, err := storeopen.RegistryConfig(tg)
	require.NoError(t, err)
	require.Equal(t, "ops", cfg.Schema)
	require.Equal(t, "job_", cfg.TablePrefix)

	for _, raw := range []string{"sqlite:/x.db", "redis://h", "etcd://h", "consul://h"} {
		tg, err := storeurl.Parse(raw)
		require.NoError(t, err)
		_, err = storeopen.RegistryConfig(tg)
		require.ErrorIs(t, err, store.ErrInvalid)
		require.Contains(t, err.Error(), "the fleet registry (tenure agents, tenure owner) lives in PostgreSQL, not in the "+tg.Backend.Name()+" store "+tg.Display)
	}

	// A prefix pgstore takes but the registry's longer names do not fit.
	tg, err = storeurl.Parse("postgres://h/db?tenure_prefix=" + strings.Repeat("p", 45))
	require.NoError(t, err)
	_, err = storeopen.RegistryConfig(tg)
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
func serveAndRelease(t *testing.T, o *storeopen.Opened, ttl time.Duration) {
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
	client := redisserver.RedisClient(t)
	prefix := redisserver.RedisPrefix(t, client)

	tg, err := storeurl.Parse(withParam(t, redisserver.RedisURL(), storeurl.ParamPrefix, prefix))
	require.NoError(t, err)
	require.Equal(t, prefix, tg.Backend.(*storeurl.Redis).Prefix)
	o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, time.Second)
	require.NoError(t, o.Close())
	n, err := client.Exists(t.Context(), prefix+"token").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the store did not use the URL's key prefix")

	tg, err = storeurl.Parse("redis://:Sup3rSecret@" + closedPort(t))
	require.NoError(t, err)
	_, err = storeopen.Open(t.Context(), tg, storeopen.Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach Redis at redis://:xxxxx@")
	require.NotContains(t, err.Error(), "Sup3rSecret")
}

func TestOpenEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdserver.OwnEtcd(t)
	prefix := testutil.UniqueName(t) + "/"
	tg, err := storeurl.Parse("etcd://" + strings.TrimPrefix(srv.Endpoint, "http://") + "?tenure_prefix=" + prefix)
	require.NoError(t, err)
	o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, etcdstore.MinTTL)
	require.NoError(t, o.Close())

	tg, err = storeurl.Parse("etcd://alice:Sup3rSecret@" + closedPort(t))
	require.NoError(t, err)
	_, err = storeopen.Open(t.Context(), tg, storeopen.Options{ConnectTimeout: time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach etcd at etcd://alice:xxxxx@")
	require.NotContains(t, err.Error(), "Sup3rSecret")
}

func TestOpenConsul(t *testing.T) {
	t.Parallel()
	agent := consulserver.OwnConsul(t)
	prefix := testutil.UniqueName(t) + "/"
	tg, err := storeurl.Parse("consul://" + agent.HTTPAddr + "?tenure_session_ttl_min=500ms&tenure_prefix=" + prefix)
	require.NoError(t, err)
	o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.NoError(t, err)
	serveAndRelease(t, o, time.Second)
	require.NoError(t, o.Close())

	tg, err = storeurl.Parse("consul://" + closedPort(t))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = storeopen.Open(ctx, tg, storeopen.Options{ConnectTimeout: 2 * time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable)
	require.Contains(t, err.Error(), "cannot reach Consul at consul://")
}
