package drive_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/drive"
	"github.com/tenure-dev/tenure/internal/engine"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

const ttl = 30 * time.Second

var (
	alice = store.Holder{Label: "worker", Instance: "alice"}
	bob   = store.Holder{Label: "worker", Instance: "bob"}
)

func newStore(t *testing.T) *memstore.Store {
	t.Helper()
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func acquire(t *testing.T, s store.Store, name string, h store.Holder) engine.AcquireDone {
	t.Helper()
	return drive.Call(t.Context(), s, engine.SendAcquire{Name: name, Holder: h, TTL: ttl}).(engine.AcquireDone)
}

func TestAcquireAnswers(t *testing.T) {
	t.Parallel()
	s := newStore(t)

	got := acquire(t, s, "billing", alice)
	require.NoError(t, got.Err)
	require.Nil(t, got.Held)
	g := *got.Grant
	require.False(t, g.At.IsZero(), "memstore reports its clock with a grant")
	g.At = time.Time{}
	require.Equal(t, store.Grant{Name: "billing", Holder: alice, Token: 1, Seq: 1, Remaining: ttl}, g)

	held := acquire(t, s, "billing", bob)
	require.Nil(t, held.Grant)
	require.NoError(t, held.Err)
	require.Equal(t, alice, held.Held.Holder, "a refusal names the holder")
	require.Equal(t, store.Token(1), held.Held.Token)
	require.Positive(t, held.Held.Remaining)

	bad := acquire(t, s, "", bob)
	require.ErrorIs(t, bad.Err, store.ErrInvalid)
	require.True(t, bad.Permanent, "bad input ends a campaign")
}

func TestPermanentErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err       error
		permanent bool
	}{
		{store.ErrInvalid, true},
		{store.ErrNotMigrated, true},
		{fmt.Errorf("closing: %w", store.ErrClosed), true},
		{store.ErrUnavailable, false},
		{context.DeadlineExceeded, false},
		{errors.New("connection reset"), false},
	} {
		require.Equal(t, tc.permanent, drive.Permanent(tc.err), "%v", tc.err)
	}
}

func TestClosedStoreEndsACampaign(t *testing.T) {
	t.Parallel()
	s := memstore.New(memstore.Config{})
	require.NoError(t, s.Close())
	got := acquire(t, s, "billing", alice)
	require.ErrorIs(t, got.Err, store.ErrClosed)
	require.True(t, got.Permanent)
}

// heldBy acquires n leases for h and returns their renewals.
func heldBy(t *testing.T, s store.Store, h store.Holder, n int) []store.RenewParams {
	t.Helper()
	items := make([]store.RenewParams, n)
	for i := range items {
		name := fmt.Sprintf("lease-%05d", i)
		g := acquire(t, s, name, h)
		require.NotNil(t, g.Grant, name)
		items[i] = store.RenewParams{Name: name, Holder: h, Token: g.Grant.Token, Seq: 1, TTL: ttl}
	}
	return items
}

// TestRenewSplitsBatches renews more leases than one store call may carry:
// the glue splits them and answers every one, in order.
func TestRenewSplitsBatches(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := store.MaxRenewBatch + 3
	items := heldBy(t, s, alice, n)
	items[n-1].Seq = 7 // a clone moved this one's chain

	d := drive.Call(t.Context(), s, engine.SendRenew{Items: items}).(engine.RenewDone)
	require.NoError(t, d.Err)
	require.Len(t, d.Results, n)
	for i, r := range d.Results[:n-1] {
		require.True(t, r.Renewed, items[i].Name)
		require.Equal(t, int64(2), r.Grant.Seq, items[i].Name)
	}
	require.False(t, d.Results[n-1].Renewed, "a seq mismatch is not a renewal")
	require.Equal(t, int64(1), d.Results[n-1].Grant.Seq, "the lease as it is")
}

// gatedRenewals holds every Renew call at a gate, and records how many
// were out at once.
type gatedRenewals struct {
	store.Store
	entered chan struct{}
	gate    chan struct{}
	out     atomic.Int32
	most    atomic.Int32
}

func (g *gatedRenewals) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	n := g.out.Add(1)
	defer g.out.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.entered <- struct{}{}
	<-g.gate
	return g.Store.Renew(ctx, ps)
}

// TestRenewSendsTwoBatchesAtOnce: the batches of a large renewal go two at
// a time, not one after another, and their answers keep the input order.
func TestRenewSendsTwoBatchesAtOnce(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := 2*store.MaxRenewBatch + 1
	items := heldBy(t, s, alice, n)
	gated := &gatedRenewals{Store: s, entered: make(chan struct{}, 3), gate: make(chan struct{})}
	done := make(chan engine.RenewDone, 1)
	go func() { done <- drive.Call(t.Context(), gated, engine.SendRenew{Items: items}).(engine.RenewDone) }()
	for i := range 2 {
		select {
		case <-gated.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of the renewal's batches went out before the first came back", i)
		}
	}
	close(gated.gate)
	d := <-done
	require.NoError(t, d.Err)
	require.Equal(t, int32(2), gated.most.Load(), "two batches out at once, never more")
	require.Len(t, d.Results, n)
	for i, r := range d.Results {
		require.True(t, r.Renewed, items[i].Name)
		require.Equal(t, items[i].Name, r.Grant.Name)
	}
}

// misreporting answers renewals wrongly in one of several ways.
type misreporting struct {
	store.Store
	answer func(ps []store.RenewParams, res []store.RenewResult) []store.RenewResult
}

func (m misreporting) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	res, err := m.Store.Renew(ctx, ps)
	return m.answer(ps, res), err
}

// TestMisreportedRenewalsAreFailures: an answer that does not answer what
// was asked is a store failure, which ends the tenures (promise P3).
func TestMisreportedRenewalsAreFailures(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]func([]store.RenewParams, []store.RenewResult) []store.RenewResult{
		"TooFew":  func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult { return res[:1] },
		"TooMany": func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult { return append(res, res[0]) },
		"Reordered": func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult {
			return []store.RenewResult{res[1], res[0]}
		},
		"SeqNotAdvanced": func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult {
			res[0].Grant.Seq--
			return res
		},
		"OtherHolderRenewed": func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult {
			res[1].Grant.Holder = bob
			return res
		},
		"NoTimeLeft": func(_ []store.RenewParams, res []store.RenewResult) []store.RenewResult {
			res[0].Grant.Remaining = 0
			return res
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := newStore(t)
			s := misreporting{Store: mem, answer: answer}
			var items []store.RenewParams
			for _, n := range []string{"a", "b"} {
				g := acquire(t, mem, n, alice)
				items = append(items, store.RenewParams{Name: n, Holder: alice, Token: g.Grant.Token, Seq: 1, TTL: ttl})
			}
			d := drive.Call(t.Context(), s, engine.SendRenew{Items: items}).(engine.RenewDone)
			require.ErrorIs(t, d.Err, store.ErrUnavailable)
			require.Nil(t, d.Results)
		})
	}
}

// bogusGrant hands out a grant that is no new tenure.
type bogusGrant struct{ store.Store }

func (b bogusGrant) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := b.Store.Acquire(ctx, p)
	g.Seq = 5
	return g, err
}

func TestBogusGrantIsAFailure(t *testing.T) {
	t.Parallel()
	got := acquire(t, bogusGrant{newStore(t)}, "billing", alice)
	require.Nil(t, got.Grant)
	require.ErrorIs(t, got.Err, store.ErrUnavailable)
	require.False(t, got.Permanent, "the campaign backs off and tries again")
}

func TestReleaseAnswersWithTheStoresError(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := acquire(t, s, "billing", alice)

	wrong := drive.Call(t.Context(), s, engine.SendRelease{Name: "billing", Holder: bob, Token: g.Grant.Token}).(engine.ReleaseDone)
	require.ErrorIs(t, wrong.Err, store.ErrNotHeld)
	require.Equal(t, engine.ReleaseDone{Name: "billing", Token: g.Grant.Token, Err: wrong.Err}, wrong)

	right := drive.Call(t.Context(), s, engine.SendRelease{Name: "billing", Holder: alice, Token: g.Grant.Token}).(engine.ReleaseDone)
	require.NoError(t, right.Err)
	rec, err := s.Get(t.Context(), "billing")
	require.NoError(t, err)
	require.Equal(t, store.StateReleased, rec.State)
}

func TestReleaseBatchSplitsAndAnswersInOrder(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	n := store.MaxRenewBatch + 2
	as := make([]engine.SendRelease, n)
	for i := range as {
		name := fmt.Sprintf("lease-%05d", i)
		g := acquire(t, s, name, alice)
		as[i] = engine.SendRelease{Name: name, Holder: alice, Token: g.Grant.Token}
	}
	as[n-1].Holder = bob // not bob's to release

	evs := drive.ReleaseBatch(t.Context(), s, as, time.Minute)
	require.Len(t, evs, n)
	for i, ev := range evs[:n-1] {
		require.Equal(t, engine.ReleaseDone{Name: as[i].Name, Token: as[i].Token}, ev)
	}
	last := evs[n-1].(engine.ReleaseDone)
	require.Equal(t, as[n-1].Name, last.Name)
	require.ErrorIs(t, last.Err, store.ErrNotHeld)
	for _, a := range []engine.SendRelease{as[0], as[store.MaxRenewBatch], as[n-1]} {
		rec, err := s.Get(t.Context(), a.Name)
		require.NoError(t, err)
		want := store.StateReleased
		if a.Holder == bob {
			want = store.StateHeld
		}
		require.Equal(t, want, rec.State, a.Name)
	}
}

// shortBatch answers a release batch with one result too few.
type shortBatch struct{ *memstore.Store }

func (s shortBatch) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	errs, err := s.Store.ReleaseBatch(ctx, ps)
	return errs[1:], err
}

func TestMisreportedReleaseBatchIsUnknown(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	var as []engine.SendRelease
	for _, name := range []string{"a", "b"} {
		g := acquire(t, s, name, alice)
		as = append(as, engine.SendRelease{Name: name, Holder: alice, Token: g.Grant.Token})
	}
	for i, ev := range drive.ReleaseBatch(t.Context(), shortBatch{s}, as, time.Minute) {
		d := ev.(engine.ReleaseDone)
		require.Equal(t, as[i].Name, d.Name)
		require.ErrorIs(t, d.Err, store.ErrUnavailable, as[i].Name)
	}
}

func TestFailedAnswersEveryAction(t *testing.T) {
	t.Parallel()
	cut := fmt.Errorf("%w: connection reset", store.ErrUnavailable)
	sent := engine.Instant{Mono: time.Second}
	items := []store.RenewParams{{Name: "a", Holder: alice, Token: 1, Seq: 1, TTL: ttl}}
	require.Equal(t, engine.AcquireDone{Name: "a", Holder: alice, SentAt: sent, Err: cut},
		drive.Failed(engine.SendAcquire{Name: "a", Holder: alice, TTL: ttl, SentAt: sent}, cut))
	require.Equal(t, engine.RenewDone{SentAt: sent, Items: items, Err: cut},
		drive.Failed(engine.SendRenew{Items: items, SentAt: sent}, cut))
	require.Equal(t, engine.ReleaseDone{Name: "a", Token: 1, Err: cut},
		drive.Failed(engine.SendRelease{Name: "a", Holder: alice, Token: 1}, cut))
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	interval := 10 * time.Second
	now := time.Minute
	require.Equal(t, interval, drive.Timeout(engine.SendAcquire{}, now, interval))
	require.Equal(t, interval, drive.Timeout(engine.SendRelease{}, now, interval))
	require.Equal(t, 3*time.Second, drive.Timeout(engine.SendRenew{Deadline: now + 3*time.Second}, now, interval),
		"a renewal may take until its batch's earliest deadline")
	require.Equal(t, time.Millisecond, drive.Timeout(engine.SendRenew{Deadline: now - time.Second}, now, interval),
		"a deadline already passed still gets a call that can fail")
}

func TestCheckReportsTheLeaseAsItIs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	g := acquire(t, s, "billing", alice)
	got := drive.Call(t.Context(), s, engine.SendCheck{Name: "billing", Holder: alice, Token: g.Grant.Token}).(engine.CheckDone)
	require.NoError(t, got.Err)
	require.Equal(t, store.StateHeld, got.Record.State)
	require.Equal(t, alice, got.Record.Holder)

	unknown := drive.Call(t.Context(), s, engine.SendCheck{Name: "never", Holder: alice, Token: 1}).(engine.CheckDone)
	require.NoError(t, unknown.Err, "a lease the store does not know is simply not held")
	require.Zero(t, unknown.Record.State)
}
