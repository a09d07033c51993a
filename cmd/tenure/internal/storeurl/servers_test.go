package storeurl_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
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
				Prefix: "jobs:"}},
		{name: "RedisTLS", raw: "rediss://alice:s3cr3t@cache:6380",
			want: storeurl.Target{Kind: storeurl.Redis, Display: "rediss://alice:xxxxx@cache:6380"}},
		{name: "Etcd", raw: "etcd://10.0.0.1:2379",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://10.0.0.1:2379", Endpoints: []string{"10.0.0.1:2379"}}},
		{name: "EtcdSeveralWithDefaults", raw: "etcd://alice:s3cr3t@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://alice:xxxxx@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
				Endpoints: []string{"e1:2379", "e2:2380", "[::1]:2381", "[::2]:2379"}, Prefix: "jobs/"}},
		{name: "EtcdDefaultEndpoint", raw: "ETCD://",
			want: storeurl.Target{Kind: storeurl.Etcd, Display: "etcd://", Endpoints: []string{"127.0.0.1:2379"}}},
		{name: "Consul", raw: "consul://127.0.0.1:8500",
			want: storeurl.Target{Kind: storeurl.Consul, Display: "consul://127.0.0.1:8500", Endpoints: []string{"127.0.0.1:8500"}}},
		{name: "ConsulParameters", raw: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
			want: storeurl.Target{Kind: storeurl.Consul, Display: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
				Endpoints: []string{"agent:8500"}, Prefix: "jobs/", MinSessionTTL: time.Second, LockDelay: 15 * time.Second}},
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
			require.Equal(t, tc.want.Prefix, got.Prefix)
			require.Equal(t, tc.want.MinSessionTTL, got.MinSessionTTL)
			require.Equal(t, tc.want.LockDelay, got.LockDelay)
			require.NotContains(t, got.Display, "s3cr3t")
			if strings.Contains(tc.raw, "s3cr3t") {
				require.Equal(t, "a xxxxx b", got.Redact("a s3cr3t b"))
			}
		})
	}
}
