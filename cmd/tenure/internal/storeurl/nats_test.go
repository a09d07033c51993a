package storeurl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestParseNats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, raw string
		display   string
		endpoints []string
		bucket    string
		replicas  int
	}{
		{name: "Plain", raw: "nats://10.0.0.1:4222", display: "nats://10.0.0.1:4222", endpoints: []string{"10.0.0.1:4222"}},
		{name: "Default", raw: "NATS://", display: "nats://", endpoints: []string{"127.0.0.1:4222"}},
		{name: "ClusterPasswordBucket", raw: "nats://alice:s3cr3t@n1,n2:4223/?tenure_bucket=jobs&tenure_replicas=3",
			display:   "nats://alice:xxxxx@n1,n2:4223/?tenure_bucket=jobs&tenure_replicas=3",
			endpoints: []string{"n1:4222", "n2:4223"}, bucket: "jobs", replicas: 3},
		{name: "TokenFile", raw: "nats://h?token_file=/run/nats.token", display: "nats://h?token_file=/run/nats.token", endpoints: []string{"h:4222"}},
		{name: "CredsAndTLS", raw: "nats://h?creds_file=/c.creds&tls_ca_file=/ca.pem",
			display: "nats://h?creds_file=/c.creds&tls_ca_file=/ca.pem", endpoints: []string{"h:4222"}},
		{name: "PasswordFile", raw: "nats://alice@h?password_file=/pw", display: "nats://alice@h?password_file=/pw", endpoints: []string{"h:4222"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := storeurl.Parse(tc.raw)
			require.NoError(t, err)
			n, ok := got.Backend.(*storeurl.Nats)
			require.True(t, ok)
			require.Equal(t, tc.display, got.Display)
			require.Equal(t, tc.endpoints, n.Endpoints)
			require.Equal(t, tc.bucket, n.Bucket)
			require.Equal(t, tc.replicas, n.Replicas)
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
		"BadReplicas":      {raw: "nats://h?tenure_replicas=three", want: "tenure_replicas"},
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
