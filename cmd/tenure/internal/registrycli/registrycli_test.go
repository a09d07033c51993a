package registrycli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/registrycli"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type bundle struct {
	reg    *registry.Registry
	agents string // quoted agents table
	ctx    context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := registry.Config{Schema: testutil.UniqueName(t), TablePrefix: "cli_"}
	reg, err := registry.New(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, pool, cfg.Schema) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	require.NoError(t, reg.Migrate(ctx))
	b := &bundle{reg: reg, agents: pgx.Identifier{cfg.Schema, "cli_agents"}.Sanitize(), ctx: ctx}

	// host-a: alive, owns alpha and beta. host-b: stale, owns gamma.
	// host-c: deregistered, owns delta.
	for _, id := range []string{"host-a", "host-b", "host-c"} {
		_, err := reg.Register(ctx, registry.RegisterParams{ID: id, Address: id + ":7000", Labels: map[string]string{"zone": "z1"}})
		require.NoError(t, err)
	}
	place := func(resource, agent string) {
		_, err := reg.Place(ctx, resource, registry.PlaceParams{
			Policy: func(string, []registry.Agent) (string, error) { return agent, nil },
		})
		require.NoError(t, err)
	}
	place("alpha", "host-a")
	place("beta", "host-a")
	place("gamma", "host-b")
	place("delta", "host-c")
	// The registry reads heartbeat ages with clock_timestamp(), so an old
	// heartbeat written here is what the store would say after that silence.
	_, err = pool.Exec(ctx, "UPDATE "+b.agents+" SET heartbeat_at = clock_timestamp() - interval '45 seconds' WHERE id = 'host-b'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+b.agents+" SET deregistered = true WHERE id = 'host-c'")
	require.NoError(t, err)
	return b
}

func run(b *bundle, f func(context.Context, *registry.Registry, []string, *bytes.Buffer, *bytes.Buffer) int, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := f(b.ctx, b.reg, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func agents(ctx context.Context, reg *registry.Registry, args []string, stdout, stderr *bytes.Buffer) int {
	return registrycli.Agents(ctx, reg, args, stdout, stderr)
}

func owner(ctx context.Context, reg *registry.Registry, args []string, stdout, stderr *bytes.Buffer) int {
	return registrycli.Owner(ctx, reg, args, stdout, stderr)
}

func TestCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("AgentsTable", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(b, agents)
		require.Equal(t, registrycli.ExitOK, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 4)
		require.Regexp(t, `^AGENT\s+STATE\s+HEARTBEAT AGE\s+OWNED\s+ADDRESS\s+INSTANCE\s+LABELS$`, lines[0])
		require.Regexp(t, `^host-a\s+alive\s+\S+\s+2\s+host-a:7000\s+\S+\s+zone=z1$`, lines[1])
		require.Regexp(t, `^host-b\s+stale\s+4\d\.\d+s\s+1\s+host-b:7000`, lines[2])
		require.Regexp(t, `^host-c\s+deregistered\s+\S+\s+1\s+host-c:7000`, lines[3])
	})

	t.Run("AgentsJSON", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(b, agents, "--json")
		require.Equal(t, registrycli.ExitOK, code, errOut)
		require.Equal(t, 1, strings.Count(out, "\n"), "one object on one line")
		var got struct {
			Agents []struct {
				ID             string            `json:"id"`
				State          string            `json:"state"`
				Owned          int64             `json:"owned"`
				HeartbeatAgeMS int64             `json:"heartbeat_age_ms"`
				StaleAfterMS   int64             `json:"stale_after_ms"`
				Labels         map[string]string `json:"labels"`
				LastHeartbeat  *time.Time        `json:"last_heartbeat"`
			} `json:"agents"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		require.Len(t, got.Agents, 3)
		require.Equal(t, "host-a", got.Agents[0].ID)
		require.Equal(t, "alive", got.Agents[0].State)
		require.Equal(t, int64(2), got.Agents[0].Owned)
		require.Equal(t, map[string]string{"zone": "z1"}, got.Agents[0].Labels)
		require.Equal(t, "stale", got.Agents[1].State)
		require.GreaterOrEqual(t, got.Agents[1].HeartbeatAgeMS, int64(45_000))
		require.Equal(t, int64(30_000), got.Agents[1].StaleAfterMS)
		require.NotNil(t, got.Agents[1].LastHeartbeat)
		require.Equal(t, "deregistered", got.Agents[2].State)
	})

	t.Run("OwnerAlive", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(b, owner, "alpha")
		require.Equal(t, registrycli.ExitOK, code, errOut)
		require.Regexp(t, `^alpha: owned by host-a \(host-a:7000\), alive: last heartbeat \S+ ago by the store's clock\n$`, out)
		require.Empty(t, errOut)
	})

	t.Run("OwnerNone", func(t *testing.T) {
		t.Parallel()
		code, out, _ := run(b, owner, "nothing")
		require.Equal(t, registrycli.ExitNoOwner, code)
		require.Equal(t, "nothing: no owner\n", out)
	})

	t.Run("OwnerDead", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := run(b, owner, "gamma")
		require.Equal(t, registrycli.ExitOwnerDead, code)
		require.Regexp(t, `^gamma: owned by host-b, dead: last heartbeat 4\d\.\d+s ago by the store's clock\n$`, out)
		require.Contains(t, errOut, "do not place gamma elsewhere")

		code, out, _ = run(b, owner, "delta")
		require.Equal(t, registrycli.ExitOwnerDead, code)
		require.Contains(t, out, "dead: deregistered")
	})

	t.Run("OwnerJSON", func(t *testing.T) {
		t.Parallel()
		type answer struct {
			Resource       string `json:"resource"`
			Outcome        string `json:"outcome"`
			Agent          string `json:"agent"`
			HeartbeatAgeMS int64  `json:"heartbeat_age_ms"`
			Deregistered   bool   `json:"deregistered"`
		}
		for _, tt := range []struct {
			resource string
			code     int
			want     answer
		}{
			{"alpha", registrycli.ExitOK, answer{Resource: "alpha", Outcome: "alive", Agent: "host-a"}},
			{"nothing", registrycli.ExitNoOwner, answer{Resource: "nothing", Outcome: "no_owner"}},
			{"delta", registrycli.ExitOwnerDead, answer{Resource: "delta", Outcome: "owner_dead", Agent: "host-c", Deregistered: true}},
		} {
			code, out, errOut := run(b, owner, tt.resource, "--json") // flags may follow the argument
			require.Equal(t, tt.code, code, errOut)
			var got answer
			require.NoError(t, json.Unmarshal([]byte(out), &got))
			got.HeartbeatAgeMS = 0
			require.Equal(t, tt.want, got)
		}
		code, out, _ := run(b, owner, "--json", "gamma")
		require.Equal(t, registrycli.ExitOwnerDead, code)
		require.Contains(t, out, `"heartbeat_age_ms":4`)
	})

	t.Run("Usage", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			name string
			f    func(context.Context, *registry.Registry, []string, *bytes.Buffer, *bytes.Buffer) int
			args []string
			want string
		}{
			{"OwnerNoArgument", owner, nil, "missing RESOURCE"},
			{"OwnerTwoArguments", owner, []string{"a", "b"}, `unexpected argument "b"`},
			{"OwnerEmpty", owner, []string{""}, "resource id is empty"},
			{"OwnerTooLong", owner, []string{strings.Repeat("r", registry.MaxResourceLen+1)}, "resource id is 256 bytes long"},
			{"OwnerBadFlag", owner, []string{"--jsn", "a"}, "flag provided but not defined: -jsn"},
			{"AgentsArgument", agents, []string{"host-a"}, `unexpected argument "host-a"`},
			{"AgentsBadFlag", agents, []string{"--watch"}, "flag provided but not defined: -watch"},
		} {
			code, out, errOut := run(b, tt.f, tt.args...)
			require.Equal(t, registrycli.ExitUsage, code, tt.name)
			require.Empty(t, out, tt.name)
			require.True(t, strings.HasPrefix(errOut, "tenure: "), tt.name)
			require.Contains(t, errOut, tt.want, tt.name)
			require.Equal(t, 1, strings.Count(errOut, "\n"), tt.name)
		}
		code, out, _ := run(b, owner, "--help")
		require.Equal(t, registrycli.ExitOK, code)
		require.Contains(t, out, "usage: tenure owner RESOURCE [--json]")
		code, out, _ = run(b, owner, "--", "--json")
		require.Equal(t, registrycli.ExitNoOwner, code, "after --, --json is the resource")
		require.Equal(t, "--json: no owner\n", out)
	})
}

func TestStoreErrors(t *testing.T) {
	t.Parallel()
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	reg, err := registry.New(pool, registry.Config{Schema: testutil.UniqueName(t), TablePrefix: "never_migrated_"})
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	code := registrycli.Owner(t.Context(), reg, []string{"r"}, &stdout, &stderr)
	require.Equal(t, registrycli.ExitNotMigrated, code)
	require.Contains(t, stderr.String(), "tenure migrate")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	stderr.Reset()
	code = registrycli.Agents(ctx, reg, nil, &stdout, &stderr)
	require.Equal(t, registrycli.ExitUnavailable, code)
	require.True(t, strings.HasPrefix(stderr.String(), "tenure: agents: registry: "), stderr.String())
}
