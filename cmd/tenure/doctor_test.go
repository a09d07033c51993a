package main

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/doctor"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/supervise"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
)

// TestDoctor runs `tenure doctor` as an operator would: a healthy store
// exits 0 with a table, a clock-skewed host (the drill variable) and an
// unreachable store exit 1 with a FAIL and what to do.
func TestDoctor(t *testing.T) {
	t.Parallel()
	t.Run("Healthy", func(t *testing.T) {
		t.Parallel()
		p := run(t, testEnv(t), "doctor", "--ttl", "10s", "--store", "sqlite:"+filepath.Join(t.TempDir(), "d.db"))
		out := p.stdout.rest()
		t.Log("\n" + out)
		require.Equal(t, 0, p.code, "stderr:\n%s", p.stderr.rest())
		require.Contains(t, out, "CHECK          STATUS  FINDING")
		require.Contains(t, out, "lease-cycle    OK")
		require.Contains(t, out, " 0 FAIL")
		_, how := supervise.Mode()
		require.Regexp(t, `(?m)^supervision +(OK|WARN) +`+regexp.QuoteMeta(how)+`$`, out)
	})
	t.Run("SupervisionFallback", func(t *testing.T) {
		t.Parallel()
		p := run(t, testEnv(t, supervise.NoCgroupEnv+"=1"), "doctor", "--store", "sqlite:"+filepath.Join(t.TempDir(), "d.db"))
		out := p.stdout.rest()
		require.Equal(t, 0, p.code, "stderr:\n%s", p.stderr.rest())
		require.Contains(t, out, "supervision    WARN    child subreaper and task scan (no cgroup: TENURE_RUN_NO_CGROUP is set)")
		require.Contains(t, out, "supervision (WARN): unset TENURE_RUN_NO_CGROUP")
	})
	t.Run("SupervisionCgroupV1", func(t *testing.T) {
		t.Parallel()
		if !freezerMounted() {
			if os.Getenv("CI") != "" {
				t.Fatal("no cgroup v1 freezer hierarchy is mounted on this host; CI runs as root on a host with the v1 freezer mounted beside cgroup v2")
			}
			t.Skip("no cgroup v1 freezer hierarchy is mounted on this host")
		}
		p := run(t, testEnv(t, supervise.NoCgroupV2Env+"=1"), "doctor", "--store", "sqlite:"+filepath.Join(t.TempDir(), "d.db"))
		out := p.stdout.rest()
		require.Equal(t, 0, p.code, "stderr:\n%s", p.stderr.rest())
		require.Regexp(t, `(?m)^supervision +OK +cgroup v1 freezer \(each command in a freezer cgroup of its own under /`, out)
	})
	t.Run("SkewedClock", func(t *testing.T) {
		t.Parallel()
		client := redisserver.RedisClient(t)
		prefix := redisserver.RedisPrefix(t, client)
		u, err := url.Parse(redisserver.RedisURL())
		require.NoError(t, err)
		u.RawQuery = url.Values{"tenure_prefix": {prefix}}.Encode()
		p := run(t, testEnv(t, doctor.EnvClockOffset+"=-504h"), "doctor", "--json", "--store", u.String())
		require.Equal(t, 1, p.code, "stderr:\n%s", p.stderr.rest())
		var rep doctor.Report
		require.NoError(t, json.Unmarshal([]byte(p.stdout.rest()), &rep))
		require.False(t, rep.OK)
		var clock *doctor.Finding
		for i, f := range rep.Findings {
			if f.Check == doctor.CheckClock && clock == nil {
				clock = &rep.Findings[i]
			}
		}
		require.NotNil(t, clock)
		require.Equal(t, doctor.Fail, clock.Status)
		require.Regexp(t, `^this host's clock is (503h59m59\.9\d*|504h0m0(\.0\d*)?)s behind the store's`, clock.Detail)
		require.Contains(t, clock.Fix, "time synchronisation")
	})
	t.Run("Unreachable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		p := run(t, testEnv(t), "doctor", "--store", "redis://"+addr)
		out := p.stdout.rest()
		require.Equal(t, 1, p.code, "stderr:\n%s", p.stderr.rest())
		require.Contains(t, out, "reachable  FAIL    cannot reach Redis at redis://"+addr)
		require.Contains(t, out, "What to do:")
		require.Contains(t, out, "0 OK, 0 WARN, 1 FAIL")
	})
	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		p := run(t, testEnv(t, doctor.EnvClockOffset+"=soon"), "doctor", "--store", "sqlite:"+filepath.Join(t.TempDir(), "d.db"))
		require.Equal(t, 64, p.code)
		require.Contains(t, p.stderr.rest(), "TENURE_DOCTOR_CLOCK_OFFSET=\"soon\" is not a duration")
		p = run(t, testEnv(t), "doctor", "--store", "nope://x")
		require.Equal(t, 64, p.code)
		h := run(t, testEnv(t), "help")
		require.Contains(t, h.stdout.rest(), "tenure doctor [--ttl 30s] [--label L] [--json] [--store URL]")
	})
}

// TestDoctorLeavesOneHiddenLease runs doctor twice on one store: it leaves
// one released record of its lease, whose token counter the second run
// took up, and status lists it only when named.
func TestDoctorLeavesOneHiddenLease(t *testing.T) {
	t.Parallel()
	storeURL := "sqlite:" + filepath.Join(t.TempDir(), "d.db")
	env := testEnv(t)
	for range 2 {
		p := run(t, env, "doctor", "--ttl", "10s", "--store", storeURL)
		require.Equal(t, 0, p.code, "stdout:\n%s\nstderr:\n%s", p.stdout.rest(), p.stderr.rest())
	}
	run(t, env, "run", "--name", "nightly", "--store", storeURL, "--", "true")

	type snapshot struct {
		Leases []struct {
			Name  string `json:"name"`
			State string `json:"state"`
			Token int64  `json:"token"`
		} `json:"leases"`
	}
	status := func(args ...string) snapshot {
		t.Helper()
		p := run(t, env, append([]string{"status", "--json", "--store", storeURL}, args...)...)
		require.Equal(t, 0, p.code, "stderr:\n%s", p.stderr.rest())
		var s snapshot
		require.NoError(t, json.Unmarshal([]byte(p.stdout.rest()), &s))
		return s
	}
	all := status()
	require.Len(t, all.Leases, 1, "every lease but doctor's: %+v", all.Leases)
	require.Equal(t, "nightly", all.Leases[0].Name)

	named := status(doctor.Lease)
	require.Len(t, named.Leases, 1)
	require.Equal(t, "released", named.Leases[0].State)
	require.Equal(t, int64(2), named.Leases[0].Token, "the second run took the lease up again, with the next token")
}
