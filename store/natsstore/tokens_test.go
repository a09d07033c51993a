package natsstore_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

func release(t *testing.T, s *natsstore.Store, g store.Grant) {
	t.Helper()
	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}), "release %q", g.Name)
}

// TestTokenIsClockFloored checks token = max(last token of the lease + 1,
// the server's clock in microseconds), and that a renewal keeps it.
func TestTokenIsClockFloored(t *testing.T) {
	t.Parallel()
	h := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}
	js, cfg := h.Bucket(t)
	s, err := natsstore.Open(t.Context(), js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	holder := testutil.Holder(t, "holder")
	name := testutil.UniqueName(t)
	micros := func() int64 {
		tm, err := s.ServerTime(t.Context())
		require.NoError(t, err)
		return tm.UnixMicro()
	}

	before := micros()
	g := acquire(t, s, name, holder, time.Minute)
	after := micros()
	require.GreaterOrEqual(t, int64(g.Token), before, "a new lease: the token is the server's clock")
	require.LessOrEqual(t, int64(g.Token), after)

	rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: name, Holder: holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.Equal(t, g.Token, rs[0].Grant.Token, "a renewal keeps the token")
	release(t, s, g)
	g2 := acquire(t, s, name, holder, time.Minute)
	require.Greater(t, g2.Token, g.Token)
	release(t, s, g2)

	// A token ahead of the clock is followed by the next integer.
	ahead := after + 1e12
	require.NoError(t, natsstore.PutRecord(t.Context(), js, cfg.Bucket, name, ahead))
	g3 := acquire(t, s, name, holder, time.Minute)
	require.Equal(t, store.Token(ahead+1), g3.Token, "the record's token is a floor")
	release(t, s, g3)
	g4 := acquire(t, s, name, holder, time.Minute)
	require.Equal(t, g3.Token+1, g4.Token, "the released tenure's token is a floor")
	release(t, s, g4)

	// The greatest int64 has no successor: refused, nothing written.
	require.NoError(t, natsstore.PutRecord(t.Context(), js, cfg.Bucket, name, math.MaxInt64))
	_, err = s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: holder, TTL: time.Minute})
	require.ErrorContains(t, err, "tokens cannot grow any more")
	r, err := s.Get(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, store.StateReleased, r.State, "the refused acquisition wrote nothing")
}

// TestTokensSurvivePowerLoss is issue 30's scene: nats-server acknowledges
// writes before they reach the disk (it syncs every two minutes by
// default), so a power loss of a one-replica server loses the stream's
// last messages and moves its sequence back. Here the disk is a copy of
// the store directory taken at a sync point; the server writes on,
// tokens are handed out, then it dies (SIGKILL) with its directory rolled
// back to the copy. Every later token must be above every token handed
// out before, or a fence that accepted one of the lost ones would accept
// a new holder's equal token, or refuse it.
func TestTokensSurvivePowerLoss(t *testing.T) {
	t.Parallel()
	srv := natsserver.OwnNats(t)
	h := natsserver.NatsHarness{Server: srv}
	js, cfg := h.Bucket(t)
	s, err := natsstore.Open(t.Context(), js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	stream, err := js.Stream(t.Context(), "KV_"+cfg.Bucket)
	require.NoError(t, err)
	holder := testutil.Holder(t, "holder")
	old, lost := testutil.UniqueName(t)+"_old", testutil.UniqueName(t)+"_lost"
	answers := func(step string) {
		t.Helper()
		require.Eventually(t, func() bool {
			_, err := s.Get(t.Context(), old)
			return !errors.Is(err, store.ErrUnavailable)
		}, eventTimeout, 10*time.Millisecond, "%s: the server answers", step)
	}
	lastSeq := func() uint64 {
		t.Helper()
		info, err := stream.Info(t.Context())
		require.NoError(t, err)
		return info.State.LastSeq
	}

	var issued store.Token
	cycle := func(name string, n int) {
		t.Helper()
		for range n {
			g := acquire(t, s, name, holder, time.Minute)
			require.Greater(t, g.Token, issued)
			issued = g.Token
			release(t, s, g)
		}
	}
	cycle(old, 3)

	// The sync point: what the disk holds. The server is stopped so that
	// the copy is whole.
	jsDir := filepath.Join(srv.Dir(), "js")
	disk := filepath.Join(t.TempDir(), "js")
	srv.Kill()
	require.NoError(t, os.CopyFS(disk, os.DirFS(jsDir)))
	require.NoError(t, srv.Restart(t.Context()))
	answers("after the sync point")
	synced := lastSeq()

	// The unsynced tail: tenures of a lease the disk knows and of one it
	// does not, each token accepted somewhere; the last one still held.
	cycle(old, 5)
	cycle(lost, 5)
	kept := acquire(t, s, lost, holder, time.Minute)
	require.Greater(t, kept.Token, issued)
	issued = kept.Token
	written := lastSeq()
	require.Greater(t, written, synced)

	// The power loss.
	srv.Kill()
	require.NoError(t, os.RemoveAll(jsDir))
	require.NoError(t, os.CopyFS(jsDir, os.DirFS(disk)))
	require.NoError(t, srv.Restart(t.Context()))
	answers("after the power loss")
	require.Equal(t, synced, lastSeq(), "the server lost the tail: its sequence went back")
	_, err = s.Get(t.Context(), lost)
	require.ErrorIs(t, err, store.ErrNotFound, "the lease only the tail knew is gone")
	rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: lost, Holder: holder, Token: kept.Token, Seq: kept.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.False(t, rs[0].Renewed, "the holder of a tenure the loss forgot stands down at its next renewal")

	for _, name := range []string{old, lost} {
		g := acquire(t, s, name, holder, time.Minute)
		require.Greater(t, g.Token, issued, "lease %s: a token after the power loss is above every token handed out before it", name)
		issued = g.Token
		release(t, s, g)
	}
}

// TestTokensSurviveBucketRecreation: the clock floor keeps tokens growing
// even across a bucket deleted and made again, which empties the stream
// and starts its sequence at 1.
func TestTokensSurviveBucketRecreation(t *testing.T) {
	t.Parallel()
	h := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}
	js, cfg := h.Bucket(t)
	s, err := natsstore.Open(t.Context(), js, cfg)
	require.NoError(t, err)
	holder := testutil.Holder(t, "holder")
	name := testutil.UniqueName(t)
	g := acquire(t, s, name, holder, time.Minute)
	release(t, s, g)
	require.NoError(t, s.Close())

	ctx := context.WithoutCancel(t.Context())
	require.NoError(t, js.DeleteKeyValue(ctx, cfg.Bucket))
	require.NoError(t, natsstore.Migrate(ctx, js, cfg))
	s, err = natsstore.Open(ctx, js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	_, err = s.Get(ctx, name)
	require.ErrorIs(t, err, store.ErrNotFound, "the new bucket is empty")
	g2 := acquire(t, s, name, holder, time.Minute)
	require.Greater(t, g2.Token, g.Token)
}
