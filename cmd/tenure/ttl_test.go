package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/cli"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// TestRunRefusesATTLTheStoreWouldRound: etcd keeps TTLs in whole seconds,
// so `tenure run --ttl 2.5s` on etcd, with --wait or without, is refused
// at once as a usage error that names --ttl and the TTLs to use, rather
// than failing with the store's grant of 3s as no grant (without --wait)
// or waiting forever for a grant it would accept (with it).
func TestRunRefusesATTLTheStoreWouldRound(t *testing.T) {
	t.Parallel()
	srv := etcdserver.OwnEtcd(t)
	storeURL := "etcd://" + strings.TrimPrefix(srv.Endpoint, "http://") + "?tenure_prefix=" + testutil.UniqueName(t) + "/"
	env := testEnv(t)

	for _, wait := range [][]string{nil, {"--wait"}} {
		args := append(append([]string{"run", "--name", "nightly", "--ttl", "2.5s", "--store", storeURL}, wait...), "--", "sh", "-c", "echo ran")
		p := run(t, env, args...)
		require.Equal(t, cli.ExitUsage, p.code, "%v: %s", wait, p.stderr.all())
		require.Empty(t, p.stdout.rest(), "the command never ran")
		require.Contains(t, p.stderr.rest(), "run: --ttl 2.5s: the etcd store keeps TTLs in whole seconds; use 2s or 3s")
	}

	st := status(t, testEnv(t, storeurl.EnvVar+"="+storeURL), "nightly")
	require.Equal(t, "absent", st.State, "nothing was acquired")

	ok := run(t, env, "run", "--name", "nightly", "--ttl", (3 * time.Second).String(), "--store", storeURL, "--", "sh", "-c", "echo ran")
	require.Equal(t, 0, ok.code, ok.stderr.all())
	require.Contains(t, ok.stdout.rest(), "ran")
}
