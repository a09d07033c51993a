package doctor_test

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/doctor"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

func TestMain(m *testing.M) {
	testserver.Main(m, etcdserver.Shared, consulserver.Shared, natsserver.Shared)
}

// fast keeps the checks short: the clock is sampled over 300 ms.
var fast = doctor.Options{TTL: 10 * time.Second, ClockSpan: 300 * time.Millisecond, ClockSamples: 4}

func withParams(t *testing.T, raw string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func pgStoreURL(t *testing.T, user string) string {
	t.Helper()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresConfig(t)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, cfg.Schema) })
	raw := withParams(t, testutil.PostgresURL(), map[string]string{"tenure_schema": cfg.Schema, "tenure_prefix": cfg.TablePrefix})
	// Migrated as `tenure migrate` does: the leases and the fleet registry.
	_, err := open(t, raw).Migrate(t.Context())
	require.NoError(t, err)
	if user != "" {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		u.User = url.User(user)
		raw = u.String()
	}
	return raw
}

func redisStoreURL(t *testing.T) string {
	t.Helper()
	c := redisserver.RedisClient(t)
	return withParams(t, redisserver.RedisURL(), map[string]string{"tenure_prefix": redisserver.RedisPrefix(t, c)})
}

func open(t *testing.T, raw string) *storeopen.Opened {
	t.Helper()
	tg, err := storeurl.Parse(raw)
	require.NoError(t, err)
	o, err := storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Close()) })
	return o
}

// find returns the findings of check.
func find(fs []doctor.Finding, check string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

func describe(fs []doctor.Finding) string {
	var b strings.Builder
	_ = doctor.WriteTable(&b, "store", fs)
	return b.String()
}

// TestHealthyStores runs every check against each real store and finds no
// FAIL: the store answers, the lease cycle goes through and its release is
// announced.
func TestHealthyStores(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) string{
		"SQLite":     func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "doctor.db") },
		"always":     func(*testing.T) string { return "always:the%20doctor%27s%20test%20is%20idempotent" },
		"PostgreSQL": func(t *testing.T) string { return pgStoreURL(t, "") },
		"Redis":      redisStoreURL,
		"MySQL": func(t *testing.T) string {
			owner := mysqlserver.MySQLDB(t, "")
			cfg := mysqlserver.MySQLConfig(t)
			mysqlserver.MySQLSchema(t, owner, cfg)
			return withParams(t, mysqlserver.MySQLURL(), map[string]string{"tenure_prefix": cfg.TablePrefix})
		},
		"etcd": func(t *testing.T) string {
			return "etcd://" + etcdserver.SharedEtcd(t).Addr() + "?tenure_prefix=" + testutil.UniqueName(t) + "/"
		},
		"NATS": func(t *testing.T) string {
			_, cfg := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}.Bucket(t)
			return natsserver.SharedNats(t).URL + "?tenure_bucket=" + cfg.Bucket
		},
		"Consul": func(t *testing.T) string {
			return "consul://" + consulserver.SharedConsul(t).HTTPAddr + "?tenure_session_ttl_min=" +
				consulserver.ConsulSessionTTLMin.String() + "&tenure_prefix=" + testutil.UniqueName(t) + "/"
		},
	}
	for name, makeURL := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := open(t, makeURL(t))
			fs := doctor.Check(t.Context(), o, fast)
			t.Log("\n" + describe(fs))
			require.False(t, doctor.Failed(fs), describe(fs))
			for _, check := range []string{doctor.CheckReachable, doctor.CheckSchema, doctor.CheckTTL, doctor.CheckClock, doctor.CheckLeaseCycle, doctor.CheckNotifications} {
				require.NotEmpty(t, find(fs, check), "no %s finding", check)
			}
			require.Equal(t, doctor.OK, find(fs, doctor.CheckLeaseCycle)[0].Status)
			require.Equal(t, doctor.OK, find(fs, doctor.CheckNotifications)[0].Status, describe(fs))
			switch name {
			case "MySQL":
				require.Contains(t, find(fs, doctor.CheckNotifications)[0].Detail, "sends no notifications")
			case "always":
				require.Contains(t, find(fs, doctor.CheckNotifications)[0].Detail, "keeps no leases")
			default:
				require.Contains(t, find(fs, doctor.CheckNotifications)[0].Detail, "was announced")
			}
			if name == "NATS" {
				require.Contains(t, find(fs, doctor.CheckSchema)[0].Detail, "per-key TTLs")
				durability := find(fs, doctor.CheckDurability)
				require.Len(t, durability, 1, describe(fs))
				require.Equal(t, doctor.Warn, durability[0].Status, "a bucket of one replica")
				require.Contains(t, durability[0].Detail, "kept by 1 server,")
				require.Contains(t, durability[0].Fix, "sync_always")
			}
			history := find(fs, doctor.CheckHistory)
			if name == "SQLite" || name == "PostgreSQL" {
				require.Len(t, history, 1, describe(fs))
				require.Equal(t, doctor.OK, history[0].Status, describe(fs))
				require.Contains(t, history[0].Detail, "shows the release")
			} else {
				require.Empty(t, history, "the %s store keeps no history", name)
			}
			clock := find(fs, doctor.CheckClock)[0]
			switch name {
			case "etcd", "Consul":
				require.Contains(t, clock.Detail, "no wall-clock expiry")
			case "SQLite":
				require.Contains(t, clock.Detail, "this host's")
			case "always":
				require.Contains(t, clock.Detail, "keeps no time")
			default:
				require.Equal(t, doctor.OK, clock.Status, describe(fs))
				require.Contains(t, clock.Detail, "the store's (median of 4 readings")
			}
		})
	}
}

// TestRedisDurability checks that the durability findings follow the
// server's settings: the machine's Redis runs without an append-only file,
// which is a WARN saying what a restart loses and how to configure it.
func TestRedisDurability(t *testing.T) {
	t.Parallel()
	c := redisserver.RedisClient(t)
	o := open(t, redisStoreURL(t))
	fs := find(doctor.Check(t.Context(), o, fast), doctor.CheckDurability)
	require.NotEmpty(t, fs)
	cfg, err := c.ConfigGet(t.Context(), "appendonly").Result()
	require.NoError(t, err)
	if cfg["appendonly"] == "yes" {
		for _, f := range fs {
			require.NotContains(t, f.Detail, "appendonly=")
		}
		return
	}
	require.Equal(t, doctor.Warn, fs[0].Status)
	require.Contains(t, fs[0].Detail, "appendonly=no: a restart loses every write")
	require.Equal(t, "run with appendonly yes and appendfsync always", fs[0].Fix)
}

// TestSkewedClock plays a host whose clock is wrong through the lease
// client's clock: three weeks behind is a FAIL, two seconds ahead a WARN.
func TestSkewedClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		offset time.Duration
		status doctor.Status
		says   string
	}{
		{-504 * time.Hour, doctor.Fail, `^this host's clock is (503h59m59\.9\d*|504h0m0(\.0\d*)?)s behind the store's`},
		{2 * time.Second, doctor.Warn, `^this host's clock is (1\.9\d*|2(\.0\d*)?)s ahead of the store's`},
	} {
		t.Run(tc.offset.String(), func(t *testing.T) {
			t.Parallel()
			o := open(t, redisStoreURL(t))
			opts := fast
			opts.Clock = doctor.OffsetClock(tenure.NewSystemClock(), tc.offset)
			fs := doctor.Check(t.Context(), o, opts)
			clock := find(fs, doctor.CheckClock)
			require.Len(t, clock, 2, describe(fs))
			require.Equal(t, tc.status, clock[0].Status, describe(fs))
			require.Regexp(t, tc.says, clock[0].Detail)
			require.Contains(t, clock[0].Fix, "time synchronisation")
			require.Equal(t, doctor.OK, clock[1].Status, "a constant offset is no step: %s", describe(fs))
		})
	}
}

// TestRoleMissingGrant connects as a role that was granted nothing on a
// migrated schema: doctor fails and names the command that prints the
// grants.
func TestRoleMissingGrant(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	role := pgserver.PostgresRole(t, owner)
	o := open(t, pgStoreURL(t, role))
	fs := doctor.Check(t.Context(), o, fast)
	require.True(t, doctor.Failed(fs), describe(fs))
	var fixes []string
	for _, f := range fs {
		if f.Status == doctor.Fail {
			fixes = append(fixes, f.Fix)
		}
	}
	t.Log("\n" + describe(fs))
	require.Contains(t, strings.Join(fixes, "\n"), "tenure migrate --print --grant "+role+" --store ", describe(fs))

	// The grants the fix names make the role whole.
	grants, err := storeopen.GrantSQL(o.Target, role)
	require.NoError(t, err)
	_, err = owner.Exec(t.Context(), grants)
	require.NoError(t, err)
	fs = doctor.Check(t.Context(), o, fast)
	require.False(t, doctor.Failed(fs), describe(fs))
	require.Equal(t, doctor.OK, find(fs, doctor.CheckLeaseCycle)[0].Status)
}

// TestReadOnlyRole connects as a role granted the read-only grants: it
// reads the leases, but the lease cycle fails, naming the run-time grants.
func TestReadOnlyRole(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	role := pgserver.PostgresRole(t, owner)
	o := open(t, pgStoreURL(t, role))
	grants, err := storeopen.ReadGrantSQL(o.Target, role)
	require.NoError(t, err)
	_, err = owner.Exec(t.Context(), grants)
	require.NoError(t, err)
	fs := doctor.Check(t.Context(), o, fast)
	t.Log("\n" + describe(fs))
	require.Equal(t, doctor.OK, find(fs, doctor.CheckSchema)[0].Status, describe(fs))
	cycle := find(fs, doctor.CheckLeaseCycle)
	require.Len(t, cycle, 1, describe(fs))
	require.Equal(t, doctor.Fail, cycle[0].Status)
	require.Contains(t, cycle[0].Detail, "the role may not acquire a lease")
	require.Contains(t, cycle[0].Fix, "tenure migrate --print --grant "+role+" --store ")
	require.Contains(t, cycle[0].Fix, "--grant-read")
}

// TestNotMigrated checks that an empty schema is a FAIL naming tenure
// migrate.
func TestNotMigrated(t *testing.T) {
	t.Parallel()
	pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgstore.Config{Schema: testutil.UniqueName(t)}
	o := open(t, withParams(t, testutil.PostgresURL(), map[string]string{"tenure_schema": cfg.Schema}))
	fs := doctor.Check(t.Context(), o, fast)
	schema := find(fs, doctor.CheckSchema)
	require.Len(t, schema, 1)
	require.Equal(t, doctor.Fail, schema[0].Status)
	require.Contains(t, schema[0].Fix, "run `tenure migrate --store ")
	require.Empty(t, find(fs, doctor.CheckLeaseCycle), "no lease is written to an unmigrated store")
}

// TestTTLBelowStoreMinimum checks the TTL finding against etcd's 2 s
// floor and whole seconds, and the lease client's own rules.
func TestTTLBelowStoreMinimum(t *testing.T) {
	t.Parallel()
	o := open(t, "etcd://"+etcdserver.SharedEtcd(t).Addr()+"?tenure_prefix="+testutil.UniqueName(t)+"/")
	opts := fast
	opts.TTL = time.Second
	ttl := find(doctor.Check(t.Context(), o, opts), doctor.CheckTTL)
	require.Len(t, ttl, 1)
	require.Equal(t, doctor.Fail, ttl[0].Status)
	require.Equal(t, "TTL 1s is below the etcd store's minimum 2s", ttl[0].Detail)
	require.Equal(t, "use --ttl 2s or more with this store", ttl[0].Fix)

	opts.TTL = 2500 * time.Millisecond
	ttl = find(doctor.Check(t.Context(), o, opts), doctor.CheckTTL)
	require.Equal(t, doctor.Fail, ttl[0].Status, "etcd keeps TTLs in whole seconds")
	require.Equal(t, "TTL 2.5s: the etcd store keeps TTLs in whole seconds; use 2s or 3s", ttl[0].Detail)
	require.Equal(t, "use a --ttl that is a whole number of 1s with this store: the lease client refuses another", ttl[0].Fix)

	sq := open(t, "sqlite:"+filepath.Join(t.TempDir(), "doctor.db"))
	opts.TTL = 100 * time.Millisecond
	ttl = find(doctor.Check(t.Context(), sq, opts), doctor.CheckTTL)
	require.Equal(t, doctor.Fail, ttl[0].Status)
	require.Contains(t, ttl[0].Detail, "TTL (100ms) must be at least 500ms")
}

// TestUnreachableAndJSON checks the finding for a store that cannot be
// opened, and the JSON form.
func TestUnreachableAndJSON(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	tg, err := storeurl.Parse("redis://" + addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = storeopen.Open(ctx, tg, storeopen.Options{ConnectTimeout: 2 * time.Second})
	require.Error(t, err)
	fs := []doctor.Finding{doctor.Unreachable(tg.Display, err)}
	require.True(t, doctor.Failed(fs))
	var b strings.Builder
	require.NoError(t, doctor.WriteJSON(&b, tg.Display, fs))
	var rep doctor.Report
	require.NoError(t, json.Unmarshal([]byte(b.String()), &rep))
	require.False(t, rep.OK)
	require.Equal(t, "reachable", rep.Findings[0].Check)
	require.Equal(t, doctor.Fail, rep.Findings[0].Status)
	require.Contains(t, rep.Findings[0].Detail, "cannot reach Redis at redis://"+addr)
	require.Contains(t, rep.Findings[0].Fix, "check that the server behind redis://"+addr+" runs")
}

// TestSlowStore puts 40 ms of latency each way between doctor and Redis:
// with a 1 s TTL (margin 100 ms) a round trip of 80 ms eats more than
// half the margin, a WARN.
func TestSlowStore(t *testing.T) {
	t.Parallel()
	c := redisserver.RedisClient(t)
	prefix := redisserver.RedisPrefix(t, c)
	target, err := url.Parse(redisserver.RedisURL())
	require.NoError(t, err)
	p, err := faultnet.Listen(target.Host)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	target.Host = p.Addr()
	o := open(t, withParams(t, target.String(), map[string]string{"tenure_prefix": prefix}))
	p.SetDelay(40 * time.Millisecond)
	opts := fast
	opts.TTL = time.Second
	reach := find(doctor.Check(t.Context(), o, opts), doctor.CheckReachable)
	require.Len(t, reach, 1)
	require.Equal(t, doctor.Warn, reach[0].Status, reach[0].Detail)
	require.Contains(t, reach[0].Detail, "more than half the safety margin (100ms) of a 1s TTL")
	require.Equal(t, "raise --ttl, or run the holders closer to the store", reach[0].Fix)
}

// TestRedisReplication runs doctor against a durable redis-server of its
// own (appendonly yes, appendfsync always: durability OK), then gives it a
// replica: the primary's asynchronous replication is a WARN, and a store
// pointed at the replica is told to connect to the primary (and its lease
// cycle fails: the replica refuses writes).
func TestRedisReplication(t *testing.T) {
	t.Parallel()
	primary := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
	o := open(t, "redis://"+primary.Addr())
	fs := doctor.Check(t.Context(), o, fast)
	require.False(t, doctor.Failed(fs), describe(fs))
	durability := find(fs, doctor.CheckDurability)
	require.Len(t, durability, 1, describe(fs))
	require.Equal(t, doctor.OK, durability[0].Status)
	require.Contains(t, durability[0].Detail, "appendonly yes, appendfsync always")

	replica := redisserver.OwnRedis(t, redisserver.RedisConfig{AppendFsyncAlways: true})
	host, port, err := net.SplitHostPort(primary.Addr())
	require.NoError(t, err)
	require.NoError(t, replica.Client(t).SlaveOf(t.Context(), host, port).Err())
	pc := primary.Client(t)
	require.Eventually(t, func() bool {
		info, err := pc.Info(t.Context(), "replication").Result()
		return err == nil && strings.Contains(info, "connected_slaves:1")
	}, 10*time.Second, 20*time.Millisecond, "the replica did not connect")

	fs = find(doctor.Check(t.Context(), o, fast), doctor.CheckDurability)
	require.Len(t, fs, 1, describe(fs))
	require.Equal(t, doctor.Warn, fs[0].Status)
	require.Contains(t, fs[0].Detail, "connected_slaves=1: replication is asynchronous")
	require.Contains(t, fs[0].Fix, "Failure modes")

	ro := open(t, "redis://"+replica.Addr())
	fs = doctor.Check(t.Context(), ro, fast)
	require.True(t, doctor.Failed(fs), describe(fs))
	require.Equal(t, doctor.Fail, find(fs, doctor.CheckLeaseCycle)[0].Status, describe(fs))
	role := find(fs, doctor.CheckDurability)
	require.NotEmpty(t, role, describe(fs))
	require.Contains(t, role[0].Detail, "role=slave")
	require.Equal(t, "connect to the primary, or through Sentinel with redis.NewFailoverClient", role[0].Fix)
}

// TestIdentityLooksInherited checks the identity findings on PostgreSQL: a
// live holder with this host's label is fine while a process on this host
// runs it (TENURE_HOLDER in its environment) and a WARN once none does;
// two live agents with one machine-id label are a WARN naming them.
func TestIdentityLooksInherited(t *testing.T) {
	t.Parallel()
	o := open(t, pgStoreURL(t, ""))
	opts := fast
	opts.Label = "cloned-host"
	identity := func() []doctor.Finding {
		t.Helper()
		fs := doctor.Check(t.Context(), o, opts)
		t.Log("\n" + describe(fs))
		got := find(fs, doctor.CheckIdentity)
		require.Len(t, got, 2, describe(fs))
		return got
	}
	got := identity()
	require.Equal(t, doctor.OK, got[0].Status)
	require.Equal(t, `no live holder uses this host's label "cloned-host"`, got[0].Detail)
	require.Equal(t, doctor.OK, got[1].Status)
	require.Equal(t, "no two of the 0 live agents share a machine-id or hostname label", got[1].Detail)

	holder := store.Holder{Label: "cloned-host", Instance: "inherited1"}
	g, err := o.Store.Acquire(t.Context(), store.AcquireParams{Name: "nightly", Holder: holder, TTL: time.Minute})
	require.NoError(t, err)

	// A process of this host that runs the holder, as tenure run's command
	// does; cat lives until its standard input closes.
	local := exec.Command("cat")
	local.Env = append(os.Environ(), "TENURE_HOLDER="+holder.String())
	stdin, err := local.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, local.Start())
	got = identity()
	require.NoError(t, stdin.Close())
	require.NoError(t, local.Wait())
	require.Equal(t, doctor.OK, got[0].Status)
	require.Equal(t, `1 live holder(s) use this host's label "cloned-host", all running on this host`, got[0].Detail)

	got = identity()
	require.Equal(t, doctor.Warn, got[0].Status)
	require.Contains(t, got[0].Detail, `lease "nightly" by cloned-host/inherited1 (token `+g.Token.String()+`): held with this host's label "cloned-host", but no process on this host runs that holder`)
	require.Contains(t, got[0].Fix, "tenure revoke-inherited")

	reg, err := o.Registry()
	require.NoError(t, err)
	for id, machine := range map[string]string{"vm-a": "0f3c", "vm-b": "0f3c", "vm-c": "77aa"} {
		_, err := reg.Register(t.Context(), registry.RegisterParams{ID: id, Address: id + ":7000", Labels: map[string]string{"machine-id": machine}})
		require.NoError(t, err)
	}
	got = identity()
	require.Equal(t, doctor.Warn, got[1].Status)
	require.Equal(t, `live agents share a machine identity: machine-id="0f3c" on agents vm-a, vm-b`, got[1].Detail)
	require.Contains(t, got[1].Fix, "systemd-machine-id-setup")
}
