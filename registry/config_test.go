package registry_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/registry"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     registry.Config
		wantErr string // substring; empty means valid
	}{
		{name: "ZeroIsDefaults", cfg: registry.Config{}},
		{name: "StaleExactlyTwiceInterval", cfg: registry.Config{HeartbeatInterval: time.Second, StaleAfter: 2 * time.Second}},
		{name: "OddNames", cfg: registry.Config{Schema: `We "quote" it`, TablePrefix: "x'y "}},
		{name: "NegativeInterval", cfg: registry.Config{HeartbeatInterval: -time.Second}, wantErr: "HeartbeatInterval (-1s) must be positive"},
		{name: "TinyInterval", cfg: registry.Config{HeartbeatInterval: time.Millisecond}, wantErr: "must be at least 10ms"},
		{name: "NegativeStale", cfg: registry.Config{StaleAfter: -time.Second}, wantErr: "StaleAfter (-1s) must be positive"},
		{name: "StaleBelowTwiceInterval", cfg: registry.Config{HeartbeatInterval: 10 * time.Second, StaleAfter: 19 * time.Second}, wantErr: "StaleAfter (19s) must be at least 2 × HeartbeatInterval (20s)"},
		{name: "StaleBelowTwiceDefaultInterval", cfg: registry.Config{StaleAfter: 15 * time.Second}, wantErr: "StaleAfter (15s) must be at least 2 × HeartbeatInterval (20s)"},
		{name: "LongPrefix", cfg: registry.Config{TablePrefix: strings.Repeat("p", registry.MaxTablePrefixLen+1)}, wantErr: "TablePrefix"},
		{name: "LongestPrefix", cfg: registry.Config{TablePrefix: strings.Repeat("p", registry.MaxTablePrefixLen)}},
		{name: "DollarSchema", cfg: registry.Config{Schema: "a$b"}, wantErr: "contains '$'"},
		{name: "ControlPrefix", cfg: registry.Config{TablePrefix: "a\nb"}, wantErr: "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj, err := tt.cfg.Objects()
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.NotEmpty(t, obj.Agents)
				_, err = tt.cfg.MigrationSQL()
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tt.wantErr)
			require.True(t, strings.HasPrefix(err.Error(), "registry: "), err.Error())
			_, err = registry.New(nil, tt.cfg)
			require.ErrorIs(t, err, store.ErrInvalid)
		})
	}
}

func TestObjectsAndSQL(t *testing.T) {
	t.Parallel()
	obj, err := registry.Config{}.Objects()
	require.NoError(t, err)
	require.Equal(t, registry.Objects{
		Schema: "public", TablePrefix: "tenure_",
		Agents: "tenure_agents", Owners: "tenure_owners", Reassignments: "tenure_reassignments",
		Migrations: "tenure_registry_migrations", OwnersAgentIndex: "tenure_owners_agent_idx",
		ReassignmentsIndex: "tenure_reassignments_idx",
	}, obj)

	script, err := registry.Config{Schema: "s", TablePrefix: "p_"}.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, `CREATE TABLE IF NOT EXISTS "s"."p_agents"`)
	require.Contains(t, script, `REFERENCES "s"."p_agents" (id) ON DELETE RESTRICT`)
	require.Contains(t, script, `INSERT INTO "s"."p_registry_migrations" (version, name) VALUES (1, 'init') ON CONFLICT (version) DO NOTHING;`)
	require.Contains(t, script, `pg_advisory_xact_lock(hashtextextended('tenure migrate s', 0))`)
	require.NotContains(t, script, "{{")

	grants, err := registry.Config{Schema: "s", TablePrefix: "p_"}.GrantSQL("app")
	require.NoError(t, err)
	require.Contains(t, grants, `GRANT EXECUTE ON FUNCTION "s"."p_agent_register"(text, text, text, text, text, text, bigint, bigint), `)
	require.NotContains(t, grants, "TABLE", "no privilege on the tables")
	read, err := registry.Config{Schema: "s", TablePrefix: "p_"}.ReadGrantSQL("ro")
	require.NoError(t, err)
	require.Equal(t, `GRANT USAGE ON SCHEMA "s" TO "ro";
GRANT EXECUTE ON FUNCTION "s"."p_agent_get"(text), "s"."p_agent_list"(), "s"."p_owner_get"(text), "s"."p_owner_history"(text) TO "ro";
`, read)
	_, err = registry.Config{}.GrantSQL("")
	require.ErrorIs(t, err, store.ErrInvalid)

	_, err = registry.New(nil, registry.Config{})
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = registry.NewCache(nil, registry.CacheConfig{})
	require.ErrorIs(t, err, store.ErrInvalid)
}
