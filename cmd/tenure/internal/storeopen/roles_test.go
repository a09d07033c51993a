package storeopen_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestReadGrantSQL(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("postgres://h/db?tenure_schema=ops&tenure_prefix=job_")
	require.NoError(t, err)
	g, err := storeopen.ReadGrantSQL(tg, "reader")
	require.NoError(t, err)
	require.Equal(t, `GRANT USAGE ON SCHEMA "ops" TO "reader";
GRANT EXECUTE ON FUNCTION "ops"."job_get_lease"(text), "ops"."job_list_leases"(), "ops"."job_history_read"(text, timestamptz, integer), "ops"."job_window_get"(text, text), "ops"."job_history_events"(text, timestamptz, integer) TO "reader";
GRANT USAGE ON SCHEMA "ops" TO "reader";
GRANT EXECUTE ON FUNCTION "ops"."job_agent_get"(text), "ops"."job_agent_list"(), "ops"."job_owner_get"(text), "ops"."job_owner_history"(text) TO "reader";
`, g)
	_, err = storeopen.ReadGrantSQL(tg, "")
	require.ErrorIs(t, err, store.ErrInvalid)

	tg, err = storeurl.Parse("sqlite:/x.db")
	require.NoError(t, err)
	_, err = storeopen.ReadGrantSQL(tg, "reader")
	require.ErrorIs(t, err, store.ErrInvalid)
	require.ErrorContains(t, err, "no roles to grant")

	tg, err = storeurl.Parse("mysql://root@h/db")
	require.NoError(t, err)
	g, err = storeopen.ReadGrantSQL(tg, "reader")
	require.ErrorIs(t, err, store.ErrInvalid, "never the run-time grants in place of read-only ones")
	require.Empty(t, g)
}
