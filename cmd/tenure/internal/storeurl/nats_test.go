package storeurl_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

func TestParseNats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		display   string
		endpoints []string
		cfg       natsstore.Config
	}{
		{name: "Plain", raw: "nats://10.0.0.1:4222", display: "nats://10.0.0.1:4222", endpoints: []string{"10.0.0.1:4222"}},
		{name: "Default", raw: "NATS://", display: "nats://", endpoints: []string{"127.0.0.1:4222"}},
		{name: "ClusterPasswordBucket", raw: "nats://alice:s3cr3t@n1,n2:4223/?tenure_bucket=jobs&tenure_replicas=3",
			display:   "nats://alice:xxxxx@n1,n2:4223/?tenure_bucket=jobs&tenure_replicas=3",
			endpoints: []string{"n1:4222", "n2:4223"}, cfg: natsstore.Config{Bucket: "jobs", Replicas: 3}},
		{name: "TokenFile", raw: "nats://h?token_file=/run/nats.token", display: "nats://h?token_file=/run/nats.token", endpoints: []string{"h:4222"}},
		{name: "CredsAndTLS", raw: "nats://h?creds_file=/c.creds&tls_ca_file=/ca.pem",
			display: "nats://h?creds_file=/c.creds&tls_ca_file=/ca.pem", endpoints: []string{"h:4222"}},
		{name: "PasswordFile", raw: "nats://alice@h?password_file=/pw", display: "nats://alice@h?password_file=/pw", endpoints: []string{"h:4222"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			require.Equal(t, storeurl.Nats, got.Kind)
			require.Equal(t, tc.display, got.Display)
			require.Equal(t, tc.endpoints, got.Endpoints)
			require.Equal(t, tc.cfg, got.Nats)
		})
	}
}

func TestParseNatsRefused(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		raw, want, secret string
	}{
		"Opaque":           {raw: "nats:h:4222", want: "not a valid NATS URL"},
		"Path":             {raw: "nats://h/x", want: "has a path"},
		"BadBucket":        {raw: "nats://h?tenure_bucket=a.b", want: "Bucket"},
		"BadReplicas":      {raw: "nats://h?tenure_replicas=three", want: "tenure_replicas"},
		"TooManyReplicas":  {raw: "nats://h?tenure_replicas=9", want: "Replicas (9)"},
		"UserOnly":         {raw: "nats://sometoken@h", want: "token_file"},
		"PasswordNoUser":   {raw: "nats://:pw1234@h", want: "no user name", secret: "pw1234"},
		"PasswordTwice":    {raw: "nats://alice:pw1234@h?password_file=/pw", want: "no password in the URL", secret: "pw1234"},
		"TokenAndPassword": {raw: "nats://alice:pw1234@h?token_file=/t", want: "give one of", secret: "pw1234"},
		"UnknownParam":     {raw: "nats://h?timeout=1s", want: `parameter "timeout" is not known`},
		"CertWithoutKey":   {raw: "nats://h?tls_cert_file=/c.pem", want: "together"},
		"BadPort":          {raw: "nats://h:port", want: "not HOST:PORT"},
		"EmptyBucket":      {raw: "nats://h?tenure_bucket=", want: "must be given once"},
	} {
		_, err := storeurl.Parse(tc.raw)
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
		if tc.secret != "" {
			require.NotContains(t, err.Error(), tc.secret, name)
		}
	}
}

// TestOpenNats opens a NATS store from a URL against a real nats-server:
// a missing bucket is refused as not migrated until `tenure migrate`
// (Options.Migrate) creates it; then the store works.
func TestOpenNats(t *testing.T) {
	t.Parallel()
	srv := testserver.OwnNats(t)
	bucket := "b" + testutil.UniqueName(t)[len(testutil.UniqueName(t))-10:]
	tg, err := storeurl.Parse(srv.URL + "?tenure_bucket=" + bucket)
	require.NoError(t, err)

	_, err = tg.Open(t.Context(), storeurl.Options{})
	require.ErrorIs(t, err, store.ErrNotMigrated)
	require.ErrorContains(t, err, "tenure migrate")

	o, err := tg.Open(t.Context(), storeurl.Options{Migrate: true})
	require.NoError(t, err)
	msg, err := o.Migrate(t.Context())
	require.NoError(t, err)
	require.Contains(t, msg, bucket)
	require.NoError(t, o.Close())

	o, err = tg.Open(t.Context(), storeurl.Options{})
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
		_, err = tg.Open(t.Context(), storeurl.Options{})
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}
