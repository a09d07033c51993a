package storeurl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestSecurityParamsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, raw, want string }{
		{"TLSFilesWithoutTLS", "redis://127.0.0.1:6379/0?tls_ca_file=/ca.pem", "write the URL as rediss://"},
		{"CertWithoutKey", "rediss://127.0.0.1:6379/0?tls_cert_file=/c.pem", "give tls_cert_file and tls_key_file together"},
		{"KeyWithoutCert", "rediss://127.0.0.1:6379/0?tls_key_file=/k.pem", "give tls_cert_file and tls_key_file together"},
		{"PasswordFileTwice", "rediss://127.0.0.1:6379/0?password_file=/a&password_file=/b", "password_file must be given once"},
		{"EtcdPasswordFileWithoutUser", "etcd://127.0.0.1:2379?password_file=/pw", "give the user name and no password in the URL"},
		{"EtcdPasswordTwice", "etcd://root:pw@127.0.0.1:2379?password_file=/pw", "give the user name and no password in the URL"},
		{"EtcdCertWithoutKey", "etcd://127.0.0.1:2379?tls_cert_file=/c.pem", "give tls_cert_file and tls_key_file together"},
		{"EtcdUnknownParam", "etcd://127.0.0.1:2379?tls=1", "an etcd URL takes only tenure_prefix, tls_ca_file, tls_cert_file, tls_key_file and password_file"},
		{"ConsulPasswordFile", "consul://127.0.0.1:8500?password_file=/pw", "Consul takes an ACL token, not a password: give token_file"},
		{"ConsulTokenFileTwice", "consul://127.0.0.1:8500?token_file=/a&token_file=/b", "token_file must be given once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := storeurl.Parse(tc.raw)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
