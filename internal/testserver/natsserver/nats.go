package natsserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// NatsBinEnv names the environment variable that names the nats-server
// binary.
const NatsBinEnv = "TENURE_NATS_BIN"

// natsHowTo says how to get a nats-server binary.
const natsHowTo = "export " + NatsBinEnv + "=$(tools/servers/ensure.sh nats-server) builds nats-server v2.15.2 and names it"

// NatsExpiryLag is how much later than its TTL nats-server removes a
// lease's message, plus the rounding of TTLs up to whole seconds:
// the server's expiry timer may fire late by up to about a second.
const NatsExpiryLag = 2 * time.Second

// NatsBinary returns the nats-server binary $TENURE_NATS_BIN names. Unlike
// the other servers it is never looked up on PATH: the nats-server of
// Debian bookworm (2.9) has no per-key TTLs.
func NatsBinary() (string, error) {
	bin := os.Getenv(NatsBinEnv)
	if bin == "" {
		return "", fmt.Errorf("testserver: %s is unset (nats-server on PATH may be older than 2.11, which natsstore needs): %s", NatsBinEnv, natsHowTo)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("testserver: %s names %q: %w; %s", NatsBinEnv, bin, err, natsHowTo)
	}
	return bin, nil
}

// Nats is a nats-server with JetStream this process started, on a free
// loopback port with a store directory of its own.
type Nats struct {
	*testserver.Process
	// Name is the server's name, unique to it.
	Name string
	// URL is the client URL, nats://127.0.0.1:port.
	URL string
}

// StartNats starts a nats-server with JetStream on file storage and
// returns once it answers as itself (the server it connects to bears its
// unique name) with JetStream enabled. Stop it with [Process.Stop].
func StartNats(ctx context.Context) (*Nats, error) {
	bin, err := NatsBinary()
	if err != nil {
		return nil, err
	}
	return testserver.OnFreePorts(ctx, 1, func(ports []int) (*Nats, error) {
		dir, err := os.MkdirTemp("", "tenure-nats-")
		if err != nil {
			return nil, fmt.Errorf("testserver: nats data directory: %w", err)
		}
		n := &Nats{Name: "tenure-test-" + testutil.RandomHex(6), URL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
		args := []string{
			"--server_name", n.Name,
			"--addr", "127.0.0.1",
			"--port", fmt.Sprint(ports[0]),
			"--jetstream",
			"--store_dir", filepath.Join(dir, "js"),
		}
		n.Process, err = testserver.Start(ctx, testserver.Config{Name: "nats-server", Bin: bin, Args: args, Dir: dir, Ready: n.ready})
		if err != nil {
			return nil, err
		}
		return n, nil
	})
}

// OwnNats starts a server for tb alone ([StartNats]) and stops it when tb
// ends. When there is no binary, or it does not start, it stops tb through
// [testutil.NeedServer].
func OwnNats(tb testing.TB) *Nats {
	tb.Helper()
	n, err := StartNats(tb.Context())
	testutil.NeedServer(tb, "nats-server", err)
	tb.Cleanup(func() {
		if err := n.Stop(); err != nil {
			tb.Errorf("testserver: stop nats-server %s: %v", n.Name, err)
		}
	})
	return n
}

// Conn returns a new connection to the server, closed when tb ends. It
// reconnects for ever, so that a test may restart the server under it.
func (n *Nats) Conn(tb testing.TB) *nats.Conn {
	tb.Helper()
	nc, err := n.connect(nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func (n *Nats) connect(opts ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(n.URL, append([]nats.Option{nats.Timeout(5 * time.Second), nats.Name("tenure-test")}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("testserver: connect to nats-server %s: %w", n.URL, err)
	}
	return nc, nil
}

// ready checks that the server on n.URL is n and serves JetStream.
func (n *Nats) ready(ctx context.Context) error {
	nc, err := n.connect(nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	if got := nc.ConnectedServerName(); got != n.Name {
		return fmt.Errorf("%w: the nats-server on %s is %q, not %s", testserver.ErrForeign, n.URL, got, n.Name)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// NatsHarness gives the conformance suite natsstore stores on one server,
// each in a bucket of its own.
type NatsHarness struct {
	// Server is the server the stores talk to.
	Server *Nats
	// Probe is a connection to Server for the benchmark's round trip
	// ([Nats.Conn]); nil leaves the round trip unmeasured.
	Probe *nats.Conn
}

// NewStore implements [storetest.Harness].
func (h NatsHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	s, _ := h.New(tb)
	return s
}

// New is [NatsHarness.NewStore] returning the concrete store and its
// JetStream context, for backend-specific tests: a store over a fresh
// bucket made by [natsstore.Migrate], on a connection of its own. Its
// cleanup closes the store and deletes the bucket.
func (h NatsHarness) New(tb testing.TB) (*natsstore.Store, jetstream.JetStream) {
	tb.Helper()
	js, cfg := h.Bucket(tb)
	s, err := natsstore.Open(tb.Context(), js, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s, js
}

// Bucket makes a fresh bucket with [natsstore.Migrate] on a connection
// of its own and returns the connection's JetStream context and the
// bucket's configuration. Its cleanup deletes the bucket.
func (h NatsHarness) Bucket(tb testing.TB) (jetstream.JetStream, natsstore.Config) {
	tb.Helper()
	js, err := jetstream.New(h.Server.Conn(tb))
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	cfg := natsstore.Config{Bucket: "t" + testutil.RandomHex(8)}
	if err := natsstore.Migrate(tb.Context(), js, cfg); err != nil {
		// The server logs why it could not make a stream; the API error
		// does not say.
		tb.Fatalf("testserver: %v; the server's log ends:\n%s", err, h.Server.LogTail())
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteKeyValue(ctx, cfg.Bucket); err != nil {
			tb.Errorf("testserver: delete bucket %s: %v", cfg.Bucket, err)
		}
	})
	return js, cfg
}

// Capabilities implements [storetest.Harness].
func (h NatsHarness) Capabilities() storetest.Capabilities {
	caps := storetest.Capabilities{Notify: true, Line: true, NoHandoff: true, ExpiryLag: NatsExpiryLag, Faults: h.Faults()}
	if h.Probe != nil {
		caps.RoundTrip = h.roundTrip
	}
	return caps
}

// roundTrip is the store's cheapest call: a JetStream account info
// request.
func (h NatsHarness) roundTrip(ctx context.Context) error {
	js, err := jetstream.New(h.Probe)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// Shared is the nats-server [testserver.Main] starts for a package's tests
// to share when its TestMain passes it:
//
//	func TestMain(m *testing.M) { testserver.Main(m, natsserver.Shared) }
var Shared = testserver.NewShared("nats-server", StartNats, (*Nats).Stop)

// SharedNats returns the nats-server [testserver.Main] started
// ([testserver.Shared.Get]).
func SharedNats(tb testing.TB) *Nats {
	tb.Helper()
	return Shared.Get(tb)
}
