package natsstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// workerPassword is tenure-worker's password on the server
// startWithAccounts starts; tenure-operator is its no_auth_user.
const workerPassword = "worker-secret"

// startWithAccounts starts a nats-server for t alone whose accounts are
// those of docs/nats-accounts.conf, as that file is, with connections that
// give no credentials taken as tenure-operator.
func startWithAccounts(t *testing.T) *natsserver.Nats {
	t.Helper()
	accounts, err := os.ReadFile(filepath.Join("..", "..", "docs", "nats-accounts.conf"))
	require.NoError(t, err)
	bin, err := natsserver.NatsBinary()
	testutil.NeedServer(t, "nats-server", err)
	n, err := testserver.OnFreePorts(t.Context(), 1, func(ports []int) (*natsserver.Nats, error) {
		dir, err := os.MkdirTemp("", "tenure-nats-")
		if err != nil {
			return nil, err
		}
		n := &natsserver.Nats{Name: "tenure-test-" + testutil.RandomHex(6), URL: fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}
		conf := fmt.Sprintf("TENURE_OPERATOR_PASSWORD: %q\nTENURE_WORKER_PASSWORD: %q\n"+
			"server_name: %s\nlisten: \"127.0.0.1:%d\"\njetstream {store_dir: %q}\nno_auth_user: tenure-operator\n%s",
			"operator-secret", workerPassword, n.Name, ports[0], filepath.Join(dir, "js"), accounts)
		path := filepath.Join(dir, "server.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
		n.Process, err = testserver.Start(t.Context(), testserver.Config{
			Name: "nats-server", Bin: bin, Args: []string{"--config", path}, Dir: dir,
			Ready: func(ctx context.Context) error {
				nc, err := nats.Connect(n.URL, nats.NoReconnect())
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
			},
		})
		if err != nil {
			return nil, err
		}
		return n, nil
	})
	testutil.NeedServer(t, "nats-server", err)
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stop nats-server %s: %v", n.Name, err)
		}
	})
	return n
}

// TestWorkerAccount: with the permissions of docs/nats-accounts.conf a
// worker runs the whole store (open, acquire, renew, release, get, list,
// listen), and the server refuses what else it tries: another bucket's
// keys, deleting or purging its own bucket's stream, the JetStream API at
// large, subscriptions outside its inboxes. What the permissions cannot keep from it, a write
// of any key of its bucket, is shown too.
func TestWorkerAccount(t *testing.T) {
	t.Parallel()
	srv := startWithAccounts(t)
	ctx := t.Context()
	operator := srv.Conn(t)
	ojs, err := jetstream.New(operator)
	require.NoError(t, err)
	cfg := natsstore.Config{} // the bucket the file names, natsstore.DefaultBucket
	require.NoError(t, natsstore.Migrate(ctx, ojs, cfg))
	_, err = ojs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "other"})
	require.NoError(t, err)

	violations := make(chan error, 16)
	worker, err := nats.Connect(srv.URL, nats.UserInfo("tenure-worker", workerPassword),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				select {
				case violations <- err:
				default:
				}
			}
		}))
	require.NoError(t, err)
	t.Cleanup(worker.Close)
	wjs, err := jetstream.New(worker)
	require.NoError(t, err)
	s, err := natsstore.Open(ctx, wjs, cfg)
	require.NoError(t, err, "the worker opens the bucket")
	t.Cleanup(func() { _ = s.Close() })

	notices := make(chan store.Notice, 16)
	lctx, stop := context.WithCancel(ctx)
	listening := make(chan error, 1)
	go func() { listening <- s.Listen(lctx, func(n store.Notice) { notices <- n }) }()
	t.Cleanup(func() {
		stop()
		<-listening
	})
	select {
	case n := <-notices:
		require.Empty(t, n.Name, "the first notice says the watch is made")
	case <-time.After(eventTimeout):
		t.Fatal("the worker's watch was not made")
	}

	name := testutil.UniqueName(t)
	a := testutil.Holder(t, "a")
	g := acquire(t, s, name, a, 2*time.Second)
	rs, err := s.Renew(ctx, []store.RenewParams{{Name: name, Holder: a, Token: g.Token, Seq: g.Seq, TTL: 2 * time.Second}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	rec, err := s.Get(ctx, name)
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, rec.State)
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: a, Token: g.Token}))
	awaitNotice(t, notices, name)
	g2 := acquire(t, s, name, testutil.Holder(t, "b"), 2*time.Second)
	require.Greater(t, g2.Token, g.Token)
	recs, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	select {
	case err := <-violations:
		t.Fatalf("the store's own calls met a refusal: %v", err)
	default:
	}

	// Everything else is refused.
	for _, subject := range []string{
		"$KV.other.h.x",                       // another bucket
		"$JS.API.STREAM.DELETE.KV_tenure",     // its own bucket's stream
		"$JS.API.STREAM.PURGE.KV_tenure",      //
		"$JS.API.STREAM.UPDATE.KV_tenure",     //
		"$JS.API.CONSUMER.CREATE.KV_other",    // another bucket's stream
		"$JS.API.DIRECT.GET.KV_other.$KV.x.y", //
		"$JS.API.INFO",                        // the account
		"billing.charge",                      // anything else
	} {
		require.NoError(t, worker.Publish(subject, []byte("{}")))
		require.NoError(t, worker.Flush())
		select {
		case err := <-violations:
			require.ErrorContains(t, err, subject)
		case <-time.After(eventTimeout):
			t.Fatalf("the server took the worker's publish to %s", subject)
		}
	}
	for _, subject := range []string{"$KV.tenure.>", "billing.>"} {
		_, err = worker.SubscribeSync(subject)
		require.NoError(t, err)
		require.NoError(t, worker.Flush())
		select {
		case err := <-violations:
			require.ErrorContains(t, err, subject)
		case <-time.After(eventTimeout):
			t.Fatalf("the server let the worker subscribe to %s", subject)
		}
	}
	info, err := ojs.Stream(ctx, "KV_tenure")
	require.NoError(t, err, "the bucket is still there")
	require.Positive(t, info.CachedInfo().State.Msgs)

	// A bucket that does not allow direct gets is read through the
	// stream's leader.
	sc := info.CachedInfo().Config
	sc.AllowDirect = false
	_, err = ojs.UpdateStream(ctx, sc)
	require.NoError(t, err)
	s2, err := natsstore.Open(ctx, wjs, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	rec, err = s2.Get(ctx, name)
	require.NoError(t, err, "a read through the stream's leader")
	require.Equal(t, g2.Token, rec.Token)
	select {
	case err := <-violations:
		t.Fatalf("the store's read met a refusal: %v", err)
	default:
	}

	// What the permissions cannot refuse: the worker may write any key of
	// its bucket, here the held key of a lease it does not hold.
	kv, err := wjs.KeyValue(ctx, natsstore.DefaultBucket)
	require.NoError(t, err)
	keys, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	var held string
	for k := range keys.Keys() {
		if k[:2] == "h." {
			held = k
		}
	}
	require.NotEmpty(t, held)
	_, err = kv.Put(ctx, held, []byte("forged"))
	require.NoError(t, err, "a writer of the bucket can write any key in it")
	_, err = s.Get(ctx, name)
	require.Error(t, err, "the store refuses to read the forged key")
}

// awaitNotice waits for a notice of name.
func awaitNotice(t *testing.T, notices <-chan store.Notice, name string) {
	t.Helper()
	timeout := time.After(eventTimeout)
	for {
		select {
		case n := <-notices:
			if n.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("no notice of %s", name)
		}
	}
}
