// Package testca makes a throwaway certificate authority for tests that
// run servers with TLS on loopback: a CA, a server certificate for
// 127.0.0.1, ::1 and localhost, and client certificates, written as PEM
// files into a test's temporary directory. It is for tests only: the
// library and the tenure command must never import it.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made for one test.
type CA struct {
	// Dir holds the PEM files.
	Dir string
	// CertFile is the CA's certificate, what clients and servers trust.
	CertFile string

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Pair is a certificate and its private key, as PEM files.
type Pair struct {
	CertFile string
	KeyFile  string
}

// New makes a CA whose files live in a temporary directory of tb's.
func New(tb testing.TB) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "tenure test CA " + tb.Name()},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testca: make the CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testca: parse the CA: %v", err)
	}
	ca := &CA{Dir: tb.TempDir(), cert: cert, key: key}
	ca.CertFile = ca.write(tb, "ca.crt", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for 127.0.0.1, ::1 and localhost,
// usable by clients too (etcd and Consul peers present it both ways).
func (ca *CA) Server(tb testing.TB) Pair {
	tb.Helper()
	return ca.issue(tb, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client issues a client certificate whose common name is user (the user
// name PostgreSQL's cert authentication and etcd's client-cert
// authentication read from it).
func (ca *CA) Client(tb testing.TB, user string) Pair {
	tb.Helper()
	return ca.issue(tb, "client-"+user, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(tb testing.TB, name string, tmpl *x509.Certificate) Pair {
	tb.Helper()
	key := newKey(tb)
	tmpl.SerialNumber = serial(tb)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("testca: issue %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("testca: encode the key of %s: %v", name, err)
	}
	return Pair{
		CertFile: ca.write(tb, name+".crt", "CERTIFICATE", der),
		KeyFile:  ca.write(tb, name+".key", "PRIVATE KEY", keyDER),
	}
}

// write writes one PEM block to Dir/name, readable by its owner only (as
// PostgreSQL and libpq demand of key files), and returns the path.
func (ca *CA) write(tb testing.TB, name, kind string, der []byte) string {
	tb.Helper()
	path := filepath.Join(ca.Dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("testca: write %s: %v", path, err)
	}
	return path
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testca: make a key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		tb.Fatalf("testca: serial number: %v", err)
	}
	return n
}
