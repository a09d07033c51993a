package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// The nats cell keeps its leases in a JetStream KV bucket of a
// nats-server the harness starts (file storage, so a restart keeps the
// stream and the leases' last tokens) and its chains in a
// [tokenResource]: a NATS publish writes one subject, so nothing could
// write a chain and check the lease at once.

// startNats starts a nats-server with JetStream on file storage.
func startNats(ctx context.Context) (*server, error) {
	n, err := natsserver.StartNats(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	return &server{members: []*testserver.Process{n.Process}, addrs: []string{n.URL[len("nats://"):]}}, nil
}

// natsStore connects to the nats-server at addr (a proxy, or the server
// itself) and opens the cell's bucket. The connection reconnects for ever,
// a tenth of a second apart, as a worker's should across store restarts.
func natsStore(ctx context.Context, addr, bucket string) (*natsstore.Store, *nats.Conn, error) {
	nc, err := nats.Connect("nats://"+addr, nats.Timeout(time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.Name("tenure-chaos"))
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("chaos: jetstream: %w", err)
	}
	st, err := natsstore.Open(ctx, js, natsstore.Config{Bucket: bucket})
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return st, nc, nil
}

// openNatsWorker is openWorker for the nats cell.
func openNatsWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	st, nc, err := natsStore(ctx, sp.StoreAddr, sp.Prefix)
	if err != nil {
		return nil, nil, nil, err
	}
	return withTokenResource(sp, st, func() { _ = st.Close(); nc.Close() })
}

// setupNats starts the cell's nats-server, creates its bucket and makes
// the harness's own store and reader. It returns the address the proxies
// forward to.
func (c *cell) setupNats(ctx context.Context, id string, cleanups *[]func()) (string, error) {
	c.spec.Prefix = "chaos_" + id
	s, err := startNats(ctx)
	if err != nil {
		return "", err
	}
	c.server = s
	*cleanups = append(*cleanups, func() { _ = s.stop() })
	nc, err := nats.Connect("nats://"+s.addrs[0], nats.Timeout(time.Second))
	if err != nil {
		return "", fmt.Errorf("chaos: nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = natsstore.Migrate(ctx, js, natsstore.Config{Bucket: c.spec.Prefix})
	}
	nc.Close()
	if err != nil {
		return "", fmt.Errorf("chaos: create the bucket: %w", err)
	}
	st, snc, err := natsStore(ctx, s.addrs[0], c.spec.Prefix)
	if err != nil {
		return "", err
	}
	*cleanups = append(*cleanups, func() { _ = st.Close(); snc.Close() })
	res, err := c.setupTokenResource(ctx, id, cleanups)
	if err != nil {
		return "", err
	}
	c.store, c.reader = st, res
	return s.addrs[0], nil
}
