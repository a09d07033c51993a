package s3server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// BinEnv names the environment variable that names the MinIO server
// binary.
const BinEnv = "TENURE_MINIO_BIN"

// howTo says how to get a MinIO binary.
const howTo = "export " + BinEnv + "=$(tools/servers/ensure.sh minio) builds the MinIO server and names it"

// Region is the region a [Server] answers for (MinIO's default) and its
// clients sign requests for.
const Region = "us-east-1"

// Server is a single-drive MinIO server (an S3-compatible object store)
// this process started, on a free loopback port with a data directory and
// root credentials of its own.
type Server struct {
	*testserver.Process
	// Endpoint is the S3 endpoint, http://127.0.0.1:port. Clients must
	// address buckets by path ([s3.Options.UsePathStyle]).
	Endpoint string
	// AccessKey and SecretKey are the server's root credentials, random
	// and unique to it.
	AccessKey, SecretKey string
}

// Binary returns the MinIO binary: $TENURE_MINIO_BIN, or minio on PATH.
func Binary() (string, error) { return testserver.Binary(BinEnv, "minio", howTo) }

// Start starts a MinIO server and returns once it answers as itself (it
// accepts a request signed with its random root credentials). Stop it with
// [testserver.Process.Stop].
func Start(ctx context.Context) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 2, func(ports []int) (*Server, error) {
		dir, err := os.MkdirTemp("", "tenure-minio-")
		if err != nil {
			return nil, fmt.Errorf("s3server: minio data directory: %w", err)
		}
		m := &Server{
			Endpoint:  fmt.Sprintf("http://127.0.0.1:%d", ports[0]),
			AccessKey: "tenure" + testutil.RandomHex(6),
			SecretKey: testutil.RandomHex(16),
		}
		args := []string{
			"server",
			"--address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
			"--console-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
			"--quiet",
			filepath.Join(dir, "data"),
		}
		env := []string{
			"MINIO_ROOT_USER=" + m.AccessKey,
			"MINIO_ROOT_PASSWORD=" + m.SecretKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			// A drive on the root file system is fine for tests.
			"MINIO_CI_CD=on",
		}
		m.Process, err = testserver.Start(ctx, testserver.Config{
			Name: "minio", Bin: bin, Args: args, Dir: dir, Ready: m.ready,
			Prepare: func(cmd *exec.Cmd) { cmd.Env = append(os.Environ(), env...) },
		})
		if err != nil {
			return nil, err
		}
		return m, nil
	})
}

// Own starts a server for tb alone ([Start]) and stops it when tb ends.
// When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func Own(tb testing.TB) *Server {
	tb.Helper()
	m, err := Start(tb.Context())
	testutil.NeedServer(tb, "minio", err)
	tb.Cleanup(func() {
		if err := m.Stop(); err != nil {
			tb.Errorf("s3server: stop minio %s: %v", m.Endpoint, err)
		}
	})
	return m
}

// Shared is the server [testserver.Main] starts for a package's tests to
// share when its TestMain passes it:
//
//	func TestMain(m *testing.M) {
//		testserver.Main(m, s3server.Shared)
//	}
//
// Tests take it with Shared.Get.
var Shared = testserver.NewShared("minio", Start, (*Server).Stop)

// Client returns a new S3 client of the server with its root credentials,
// whose idle connections are closed when tb ends.
func (m *Server) Client(tb testing.TB) *s3.Client {
	tb.Helper()
	c, transport := m.newClient()
	tb.Cleanup(transport.CloseIdleConnections)
	return c
}

func (m *Server) newClient() (*s3.Client, *http.Transport) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	creds := aws.Credentials{AccessKeyID: m.AccessKey, SecretAccessKey: m.SecretKey, Source: "s3server"}
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(m.Endpoint),
		Region:       Region,
		Credentials:  aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		UsePathStyle: true,
		HTTPClient:   &http.Client{Transport: transport, Timeout: 30 * time.Second},
	}), transport
}

// Bucket makes a new bucket with a random name and returns its name. Its
// cleanup leaves it: the server's data directory goes with the server.
func (m *Server) Bucket(tb testing.TB) string {
	tb.Helper()
	name := "t" + testutil.RandomHex(8)
	if _, err := m.Client(tb).CreateBucket(tb.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("s3server: create bucket %s on minio %s: %v", name, m.Endpoint, err)
	}
	return name
}

// ready checks that the server accepts a request signed with m's root
// credentials. A server that does not know the access key is another
// MinIO: m's knows its key from its environment before it serves any
// request.
func (m *Server) ready(ctx context.Context) error {
	c, transport := m.newClient()
	defer transport.CloseIdleConnections()
	_, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidAccessKeyId" {
		return fmt.Errorf("%w: the S3 server on %s does not know access key %s: %w", testserver.ErrForeign, m.Endpoint, m.AccessKey, err)
	}
	return err
}
