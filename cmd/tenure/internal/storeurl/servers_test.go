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
		display   string
		want      storeurl.Backend
	}{
		{name: "Redis", raw: "redis://127.0.0.1:6379/2",
			display: "redis://127.0.0.1:6379/2", want: &storeurl.Redis{URL: "redis://127.0.0.1:6379/2"}},
		{name: "RedisPasswordAndPrefix", raw: "redis://:s3cr3t@cache:6380/0?tenure_prefix=jobs:&dial_timeout=2s",
			display: "redis://:xxxxx@cache:6380/0?tenure_prefix=jobs:&dial_timeout=2s",
			want:    &storeurl.Redis{URL: "redis://:s3cr3t@cache:6380/0?dial_timeout=2s", Prefix: "jobs:"}},
		{name: "RedisTLS", raw: "rediss://alice:s3cr3t@cache:6380",
			display: "rediss://alice:xxxxx@cache:6380", want: &storeurl.Redis{URL: "rediss://alice:s3cr3t@cache:6380"}},
		{name: "Etcd", raw: "etcd://10.0.0.1:2379",
			display: "etcd://10.0.0.1:2379", want: &storeurl.Etcd{Endpoints: []string{"10.0.0.1:2379"}}},
		{name: "EtcdSeveralWithDefaults", raw: "etcd://alice:s3cr3t@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
			display: "etcd://alice:xxxxx@e1,e2:2380,[::1]:2381,[::2]/?tenure_prefix=jobs/",
			want:    &storeurl.Etcd{Endpoints: []string{"e1:2379", "e2:2380", "[::1]:2381", "[::2]:2379"}, User: "alice", Password: "s3cr3t", Prefix: "jobs/"}},
		{name: "EtcdDefaultEndpoint", raw: "ETCD://",
			display: "etcd://", want: &storeurl.Etcd{Endpoints: []string{"127.0.0.1:2379"}}},
		{name: "Consul", raw: "consul://127.0.0.1:8500",
			display: "consul://127.0.0.1:8500", want: &storeurl.Consul{Endpoints: []string{"127.0.0.1:8500"}}},
		{name: "ConsulParameters", raw: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
			display: "consul://agent?tenure_prefix=jobs/&tenure_session_ttl_min=1s&tenure_lock_delay=15s",
			want:    &storeurl.Consul{Endpoints: []string{"agent:8500"}, Prefix: "jobs/", MinSessionTTL: time.Second, LockDelay: 15 * time.Second}},
		{name: "ConsulDefaultAgent", raw: "consul://",
			display: "consul://", want: &storeurl.Consul{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Backend)
			require.Equal(t, tc.display, got.Display)
			require.NotContains(t, got.Display, "s3cr3t")
			if strings.Contains(tc.raw, "s3cr3t") {
				require.Equal(t, "a xxxxx b", got.Redact("a s3cr3t b"))
			}
		})
	}
}
