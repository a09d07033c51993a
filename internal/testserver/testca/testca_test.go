package testca_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/testca"
)

func TestCertificatesVerify(t *testing.T) {
	t.Parallel()
	ca := testca.New(t)
	roots := x509.NewCertPool()
	pemCA, err := os.ReadFile(ca.CertFile)
	require.NoError(t, err)
	require.True(t, roots.AppendCertsFromPEM(pemCA))

	srv := ca.Server(t)
	pair, err := tls.LoadX509KeyPair(srv.CertFile, srv.KeyFile)
	require.NoError(t, err)
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		_, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host})
		require.NoError(t, err, host)
	}
	_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "example.com"})
	require.Error(t, err, "the server certificate names loopback only")

	cl := ca.Client(t, "alice")
	pair, err = tls.LoadX509KeyPair(cl.CertFile, cl.KeyFile)
	require.NoError(t, err)
	require.Equal(t, "alice", pair.Leaf.Subject.CommonName)
	_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	_, err = pair.Leaf.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "another CA does not vouch for it")
	info, err := os.Stat(cl.KeyFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}
