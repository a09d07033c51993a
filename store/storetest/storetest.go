package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// Harness gives the suite stores of one backend.
type Harness interface {
	// NewStore returns a store in a namespace of its own (its own table
	// prefix, schema, key prefix or file) and registers a cleanup with tb
	// that closes it and removes what it created. The suite may close the
	// store itself first, so that cleanup must tolerate a store that is
	// already closed.
	NewStore(tb testing.TB) store.Store

	// Capabilities describes what the backend can do and how its server
	// behaves.
	Capabilities() Capabilities
}

// Capabilities describes a backend to the suite.
type Capabilities struct {
	// Notify reports that the store implements [store.Notifier] and that
	// the suite should check its notifications.
	Notify bool

	// Line reports that the store keeps followers that ask to wait in
	// line ([store.AcquireParams.Wait]) and keeps a released lease for the
	// head of the line for [store.Handoff] (unless NoHandoff); the suite
	// checks the line.
	Line bool

	// NoHandoff reports, with Line, that the store keeps the line but no
	// released lease for its head: a release frees the lease at once and
	// only names the head in its announcement (etcd has no server clock a
	// transaction could end a hold by). The suite then checks that a
	// release refuses nobody, and that a forgotten follower leaves the line.
	NoHandoff bool

	// ExpiryLag is how much longer than its TTL the store may take to expire
	// a lease, or round a TTL up by: 0 for stores that expire exactly (for
	// example PostgreSQL and SQLite), up to one TTL more for Consul.
	ExpiryLag time.Duration

	// MinTTL is the shortest TTL the store accepts (etcd refuses leases
	// below 2 s). The suite raises the short leases of its expiry tests to
	// it. The suite takes the greater of this and [store.MinTTLOf] of each
	// store, so a store that implements [store.TTLFloor] needs not set it;
	// 0: the store's own floor.
	MinTTL time.Duration

	// RoundTrip is the store's own cheapest round trip to its server (for
	// example `SELECT 1`). [Benchmark] measures it first and reports the
	// other operations as multiples of it. Nil skips those ratios.
	RoundTrip func(ctx context.Context) error

	// NoDerivedWindow reports that the store, a [store.Windower], has no
	// clock its atomic step can read and refuses windows derived from a
	// period (etcd); the suite checks that it refuses them.
	NoDerivedWindow bool

	// Faults fails the server under a store, for the checks of what a
	// store does while cut off from its server and after it comes back;
	// each fault is injected or declined with a reason (see [Faults]).
	Faults Faults
}

const (
	// expiringTTL is the lease length of tests that wait for an expiry.
	expiringTTL = store.MinTTL
	// shortTTL is the lease length of tests that check a lease is held
	// before waiting for its expiry: long enough to check, short enough to
	// wait for.
	shortTTL = time.Second
	// longTTL is the lease length of tests that must not see an expiry.
	longTTL = time.Minute
	// remainingTolerance is how much less than its TTL a freshly granted
	// lease may report as remaining (round trips, store clock precision).
	remainingTolerance = 2 * time.Second
	// expirySlack is waited beyond an expiry, for store clock precision.
	expirySlack = 50 * time.Millisecond
	// eventTimeout bounds every wait for an event such as a notification.
	eventTimeout = 10 * time.Second
)

// Run runs the conformance suite against stores from h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	for _, area := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"Acquire", testAcquire},
		{"AcquireBatch", testAcquireBatch},
		{"Renew", testRenew},
		{"Release", testRelease},
		{"ReleaseBatch", testReleaseBatch},
		{"Token", testToken},
		{"Notify", testNotify},
		{"Line", testLine},
		{"Input", testInput},
		{"Get", testGet},
		{"History", testHistory},
		{"Window", testWindow},
		{"Payload", testPayload},
		{"Slots", testSlots},
		{"Close", testClose},
		{"Faults", testFaults},
	} {
		t.Run(area.name, func(t *testing.T) {
			t.Parallel()
			area.run(t, h)
		})
	}
}

// bundle is what one subtest works with: a fresh store and the backend's
// capabilities.
type bundle struct {
	store store.Store
	caps  Capabilities
}

func setup(t *testing.T, h Harness) *bundle {
	t.Helper()
	s := h.NewStore(t)
	require.NotNil(t, s, "Harness.NewStore returned nil")
	caps := h.Capabilities()
	caps.MinTTL = max(caps.MinTTL, store.MinTTLOf(s))
	return &bundle{store: s, caps: caps}
}

// setupHeld is setup plus a lease, named after the test, that "holder"
// holds for longTTL.
func setupHeld(t *testing.T, h Harness) (*bundle, store.Grant) {
	t.Helper()
	b := setup(t, h)
	return b, b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
}

// name returns a lease name unique to the calling test.
func name(t *testing.T) string {
	t.Helper()
	return testutil.UniqueName(t)
}

func (b *bundle) acquire(t *testing.T, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.NoError(t, err, "acquire %q by %s", name, h)
	require.Equal(t, name, g.Name)
	require.Equal(t, h, g.Holder)
	require.Positive(t, g.Token)
	require.Equal(t, int64(1), g.Seq, "a new tenure starts at seq 1")
	return g
}

// otherHolders returns holders that are not g's: a stranger, and one with
// g's label but another instance.
func otherHolders(t *testing.T, g store.Grant) []store.Holder {
	t.Helper()
	return []store.Holder{
		testutil.Holder(t, "other"),
		{Label: g.Holder.Label, Instance: g.Holder.Instance + "x"},
	}
}

// requireAbsent checks that the store has no record of name.
func (b *bundle) requireAbsent(t *testing.T, name, msg string) {
	t.Helper()
	_, err := b.store.Get(t.Context(), name)
	require.ErrorIs(t, err, store.ErrNotFound, msg)
}

// acquireHeld attempts an acquisition that must fail because the lease is
// held, and returns what the store said about the holder.
func (b *bundle) acquireHeld(t *testing.T, name string, h store.Holder, ttl time.Duration) *store.HeldError {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.ErrorIs(t, err, store.ErrHeld, "acquire %q by %s while held returned grant %+v", name, h, g)
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, name, held.Name)
	return held
}

func (b *bundle) renew(t *testing.T, g store.Grant, ttl time.Duration) store.RenewResult {
	t.Helper()
	return b.renewOne(t, store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: ttl})
}

func (b *bundle) renewOne(t *testing.T, p store.RenewParams) store.RenewResult {
	t.Helper()
	rs, err := b.store.Renew(t.Context(), []store.RenewParams{p})
	require.NoError(t, err, "renew %+v", p)
	require.Len(t, rs, 1)
	require.Equal(t, p.Name, rs[0].Grant.Name)
	return rs[0]
}

func (b *bundle) release(t *testing.T, g store.Grant) {
	t.Helper()
	err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token})
	require.NoError(t, err, "release %q by %s with token %d", g.Name, g.Holder, g.Token)
}

func (b *bundle) get(t *testing.T, name string) store.Record {
	t.Helper()
	r, err := b.store.Get(t.Context(), name)
	require.NoError(t, err, "get %q", name)
	require.Equal(t, name, r.Name)
	return r
}

// requireFresh checks the remaining time of a lease just granted or renewed
// for ttl, ttl being long enough that the tolerance is small beside it.
func (b *bundle) requireFresh(t *testing.T, ttl, remaining time.Duration) {
	t.Helper()
	require.Greater(t, remaining, ttl-remainingTolerance, "remaining time of a lease just granted for %s", ttl)
	require.LessOrEqual(t, remaining, ttl+b.caps.ExpiryLag, "remaining time of a lease just granted for %s", ttl)
}

// requireRemaining checks the remaining time of a lease held for at most ttl.
func (b *bundle) requireRemaining(t *testing.T, ttl, remaining time.Duration) {
	t.Helper()
	require.Positive(t, remaining, "a held lease has time remaining")
	require.LessOrEqual(t, remaining, ttl+b.caps.ExpiryLag, "remaining time of a lease granted for %s", ttl)
}

// requireHeld checks that the store reports the lease g as held with g's
// holder and token and the given seq.
func (b *bundle) requireHeld(t *testing.T, g store.Grant, seq int64) store.Record {
	t.Helper()
	r := b.get(t, g.Name)
	require.Equal(t, store.StateHeld, r.State)
	require.Equal(t, g.Holder, r.Holder)
	require.Equal(t, g.Token, r.Token)
	require.Equal(t, seq, r.Seq)
	require.Positive(t, r.Remaining)
	return r
}

// waitExpiry waits until a lease that had remaining time left when the store
// last reported on it has expired by the store's clock. Passing the store's
// TTL is the event itself: no signal can stand in for it.
func (b *bundle) waitExpiry(t *testing.T, remaining time.Duration) {
	t.Helper()
	require.LessOrEqual(t, remaining, b.short()+b.caps.ExpiryLag, "expiry tests use short leases")
	time.Sleep(remaining + b.caps.ExpiryLag + expirySlack)
}

// expiring is the TTL of leases that tests wait to expire:
// [store.MinTTL], or the store's minimum if greater.
func (b *bundle) expiring() time.Duration { return max(expiringTTL, b.caps.MinTTL) }

// short is the TTL of leases that tests check are held and then wait to
// expire: one second, or the store's minimum if greater.
func (b *bundle) short() time.Duration { return max(shortTTL, b.caps.MinTTL) }

// expired acquires name for h with a TTL of [bundle.expiring] and waits until it has
// expired by the store's clock, returning the expired tenure's grant.
func (b *bundle) expired(t *testing.T, name string, h store.Holder) store.Grant {
	t.Helper()
	g := b.acquire(t, name, h, b.expiring())
	b.waitExpiry(t, g.Remaining)
	return g
}
