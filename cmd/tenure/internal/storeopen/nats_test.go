package storeopen_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// TestOpenNats opens a NATS store from a URL against a real nats-server:
// a missing bucket is refused as not migrated until `tenure migrate`
// (Options.Migrate) creates it; then the store works.
func TestOpenNats(t *testing.T) {
	t.Parallel()
	srv := natsserver.OwnNats(t)
	bucket := "b" + testutil.UniqueName(t)[len(testutil.UniqueName(t))-10:]
	tg, err := storeurl.Parse(srv.URL + "?tenure_bucket=" + bucket)
	require.NoError(t, err)

	_, err = storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.ErrorIs(t, err, store.ErrNotMigrated)
	require.ErrorContains(t, err, "tenure migrate")

	o, err := storeopen.Open(t.Context(), tg, storeopen.Options{Migrate: true})
	require.NoError(t, err)
	msg, err := o.Migrate(t.Context())
	require.NoError(t, err)
	require.Contains(t, msg, bucket)
	require.NoError(t, o.Close())

	o, err = storeopen.Open(t.Context(), tg, storeopen.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, o.Close()) })
	g, err := o.Store.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "cli"), TTL: natsstore.MinTTL})
	require.NoError(t, err)
	require.Positive(t, g.Token)
	require.Equal(t, natsstore.MinTTL, store.MinTTLOf(o.Store))

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	for name, tc := range map[string]struct{ param, want string }{
		"MissingToken": {param: "token_file=" + filepath.Join(dir, "none"), want: "cannot read token_file"},
		"EmptyToken":   {param: "token_file=" + empty, want: "is empty"},
		"MissingCreds": {param: "creds_file=" + filepath.Join(dir, "none"), want: "cannot read creds_file"},
		"MissingCA":    {param: "tls_ca_file=" + filepath.Join(dir, "none"), want: "cannot read tls_ca_file"},
	} {
		tg, err := storeurl.Parse(srv.URL + "?tenure_bucket=" + bucket + "&" + tc.param)
		require.NoError(t, err, name)
		_, err = storeopen.Open(t.Context(), tg, storeopen.Options{})
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}
