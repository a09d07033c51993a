package natsserver

import (
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// nats-server of its own (JetStream on file storage), through a proxy.
func (NatsHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		srv := OwnNats(tb)
		p := testserver.Proxy(tb, strings.TrimPrefix(srv.URL, "nats://"))
		// The server as its clients see it through the proxy, to connect
		// as [Nats.Conn] does.
		proxied := &Nats{Process: srv.Process, Name: srv.Name, URL: "nats://" + p.Addr()}
		js, err := jetstream.New(proxied.Conn(tb))
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		cfg := natsstore.Config{Bucket: "t" + testutil.RandomHex(8)}
		if err := natsstore.Migrate(tb.Context(), js, cfg); err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		s, err := natsstore.Open(tb.Context(), js, cfg)
		if err != nil {
			tb.Fatalf("testserver: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s, testserver.CutFault(p, srv, s)
	}}
}
