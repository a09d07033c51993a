package main

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// TestMySQLStore runs migrate (printed and applied), run, status,
// release --force and run --wait against the real MySQL/MariaDB server, under a table
// prefix of the test's own, dropped afterwards.
func TestMySQLStore(t *testing.T) {
	t.Parallel()
	u, cfg := mysqlURL(t)
	env := testEnv(t, storeurl.EnvVar+"="+u.String())

	p := run(t, env, "migrate", "--print", "--grant", "worker")
	require.Equal(t, 0, p.code, p.stderr.all())
	printed := p.stdout.rest()
	require.Contains(t, printed, "DROP PROCEDURE IF EXISTS `"+cfg.Database+"`.`"+cfg.TablePrefix+"acquire_or_wait`;\nDELIMITER //\nCREATE PROCEDURE `"+cfg.Database+"`.`"+cfg.TablePrefix+"acquire_or_wait`(")
	require.Contains(t, printed, "GRANT EXECUTE ON PROCEDURE `"+cfg.Database+"`.`"+cfg.TablePrefix+"acquire_or_wait` TO 'worker';")
	require.NotContains(t, printed, "GRANT SELECT", "the run-time account gets no table privileges")

	m := run(t, env, "migrate")
	require.Equal(t, 0, m.code, m.stderr.all())
	require.Contains(t, m.stdout.rest(), "migrated the MySQL store "+u.String())

	flags := []string{"run", "--name", "nightly", "--ttl", "2s", "--grace", "500ms"}
	a := start(t, env, append(append(flags, "--label", "a"), blockingChild...)...)
	held := a.stdout.await(startedLine)
	first := atoi(t, held[3])

	st := status(t, env, "nightly")
	require.Equal(t, "held", st.State)
	require.Equal(t, "a/"+held[2], st.Holder)
	require.Equal(t, first, st.Token)

	busy := run(t, env, append(flags, "--label", "c", "--", "sh", "-c", "echo ran")...)
	require.Equal(t, cli.ExitNotAcquired, busy.code)
	require.Empty(t, busy.stdout.rest())

	// MySQL cannot tell the holder: release moves its chain on and the
	// lease keeps its expiry, which the next holder waits out.
	r := run(t, env, "release", "--force", "nightly")
	require.Equal(t, 0, r.code, r.stderr.all())
	require.Contains(t, r.stdout.rest(), fmt.Sprintf("the renewal chain of its holder a/%s with token %d moved on", held[2], first))
	require.Equal(t, cli.ExitLost, a.wait(), a.stderr.all())

	b := run(t, env, append(append(flags, "--label", "b", "--wait"), "--", "sh", "-c", `echo "started $TENURE_HOLDER $TENURE_TOKEN"`)...)
	require.Equal(t, 0, b.code, b.stderr.all())
	next := b.stdout.await(startedLine)
	require.Equal(t, "b", next[1])
	require.Greater(t, atoi(t, next[3]), first, "the next tenure gets a greater token")
	require.Equal(t, "released", status(t, env, "nightly").State)
}

// mysqlURL makes tables of the test's own on the MySQL/MariaDB test
// server, under a table prefix dropped afterwards, and returns the store
// URL naming them (not yet migrated) and their configuration.
func mysqlURL(t *testing.T) (*url.URL, mysqlstore.Config) {
	t.Helper()
	owner := mysqlserver.MySQLDB(t, "")
	cfg := mysqlserver.MySQLConfig(t)
	t.Cleanup(func() { mysqlserver.MySQLDrop(t, owner, cfg) })
	u, err := url.Parse(mysqlserver.MySQLURL())
	require.NoError(t, err)
	q := u.Query()
	q.Set(storeurl.ParamPrefix, cfg.TablePrefix)
	u.RawQuery = q.Encode()
	return u, cfg
}

// mysqlStore is mysqlURL's store, migrated with the tenure binary.
func mysqlStore(t *testing.T) store {
	t.Helper()
	u, _ := mysqlURL(t)
	s := store{kind: "mysql", url: u.String()}
	p := run(t, testEnv(t), "migrate", "--store", s.url)
	require.Equal(t, 0, p.code, p.stderr.all())
	return s
}
