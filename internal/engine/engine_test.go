package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tenure-dev/tenure/store"
)

const (
	ttl   = 30 * time.Second
	renew = 10 * time.Second
	tol   = ttl / 20
	// spread is the widest jitter of a follower's told retry at this TTL;
	// the harness's jitter is half the widest.
	spread = 10 * time.Millisecond
)

var errStore = errors.New("connection reset")

// harness drives an engine on virtual time. Jitter is always max/2 so
// schedules are exact.
type harness struct {
	t   *testing.T
	e   *Engine
	now Instant
	ids int
}

func newHarness(t *testing.T, tweak ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, now: Instant{Mono: time.Hour, Wall: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}}
	cfg := Config{
		Label:            "worker",
		TTL:              ttl,
		RenewInterval:    renew,
		SuspendTolerance: tol,
		NewInstance: func() string {
			h.ids++
			return fmt.Sprintf("id%d", h.ids)
		},
		Jitter: func(max time.Duration) time.Duration { return max / 2 },
	}
	for _, f := range tweak {
		f(&cfg)
	}
	h.e = New(cfg)
	return h
}

func (h *harness) step(ev Event) []Action { return h.e.Step(h.now, ev) }

// advance moves both clocks forward by d, as for a running process.
func (h *harness) advance(d time.Duration) {
	h.now.Mono += d
	h.now.Wall = h.now.Wall.Add(d)
}

// tick advances to the engine's next wake-up and delivers it on time.
func (h *harness) tick() []Action {
	h.t.Helper()
	due, ok := h.e.Next()
	require.True(h.t, ok, "engine wants no tick")
	require.GreaterOrEqual(h.t, due, h.now.Mono, "engine asked for a tick in the past")
	h.advance(due - h.now.Mono)
	return h.step(Tick{Timer: true, Due: due})
}

// acquire takes name with a grant of the full TTL after rtt.
func (h *harness) acquire(name string, token store.Token, rtt time.Duration) Acquired {
	h.t.Helper()
	send := only[SendAcquire](h.t, h.step(Want{Name: name, Campaign: true}))
	h.advance(rtt)
	acts := h.step(AcquireDone{Name: name, Holder: send.Holder, SentAt: send.SentAt,
		Grant: &store.Grant{Holder: send.Holder, Token: token, Seq: 1, Remaining: ttl}})
	return only[Acquired](h.t, acts)
}

func only[A Action](t *testing.T, acts []Action) A {
	t.Helper()
	var found []A
	for _, a := range acts {
		if x, ok := a.(A); ok {
			found = append(found, x)
		}
	}
	require.Len(t, found, 1, "want exactly one %T in %#v", *new(A), acts)
	return found[0]
}

func none[A Action](t *testing.T, acts []Action) {
	t.Helper()
	for _, a := range acts {
		_, ok := a.(A)
		require.False(t, ok, "unexpected %T in %#v", a, acts)
	}
}

func renewedAll(items []store.RenewParams) []store.RenewResult {
	out := make([]store.RenewResult, len(items))
	for i, it := range items {
		out[i] = store.RenewResult{Renewed: true, Grant: store.Grant{Holder: it.Holder, Token: it.Token, Seq: it.Seq + 1, Remaining: ttl}}
	}
	return out
}

func TestLocalDeadlineIsSendTimePlusRemainingMinusMargin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rtt    time.Duration
		grace  time.Duration
		margin time.Duration
	}{
		{"FastRoundTrip", 10 * time.Millisecond, 0, ttl / 10},
		{"SlowRoundTripWidensMargin", 2 * time.Second, 0, 4 * time.Second},
		{"GraceComesOffToo", 10 * time.Millisecond, 5 * time.Second, ttl/10 + 5*time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.Grace = tc.grace })
			sent := h.now
			a := h.acquire("billing", 7, tc.rtt)
			require.Equal(t, sent, a.Anchor, "the anchor is the send time, not the reply time")
			require.Equal(t, sent.Mono+ttl-tc.margin, a.Deadline)
			require.Equal(t, store.Token(7), a.Token)
		})
	}
}

func TestRenewKeepsTokenAdvancesSeqAndMovesDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acquire("billing", 7, time.Millisecond)
	send := only[SendRenew](t, h.tick())
	require.Equal(t, []store.RenewParams{{Name: "billing", Holder: h.e.Holder(), Token: 7, Seq: 1, TTL: ttl}}, send.Items)
	h.advance(5 * time.Millisecond)
	r := only[Renewed](t, h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)}))
	require.Equal(t, store.Token(7), r.Token)
	require.Equal(t, int64(2), r.Seq)
	require.Equal(t, send.SentAt.Mono+ttl-ttl/10, r.Deadline)
	next := only[SendRenew](t, h.tick())
	require.Equal(t, send.SentAt.Mono+renew, next.SentAt.Mono, "renewals go out once per interval")
	require.Equal(t, int64(2), next.Items[0].Seq)
}

func TestFailClosed(t *testing.T) {
	t.Parallel()
	t.Run("RenewError", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		send := only[SendRenew](t, h.tick())
		acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Err: errStore})
		lost := only[Lost](t, acts)
		require.Equal(t, ReasonRenewError, lost.Reason)
		require.ErrorIs(t, lost.Err, errStore)
		none[SendRelease](t, acts) // the work may still be stopping: releasing is its owner's call
	})
	t.Run("RenewTimeoutStandsDownBeforeExpiry", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		a := h.acquire("billing", 7, time.Millisecond)
		only[SendRenew](t, h.tick()) // no answer, ever
		acts := h.tick()
		lost := only[Lost](t, acts)
		require.Equal(t, ReasonExpiredLocally, lost.Reason)
		require.Equal(t, a.Deadline, h.now.Mono)
		require.Less(t, h.now.Mono, a.Anchor.Mono+ttl, "stood down before the store could expire the lease")
	})
	t.Run("LateSuccessAfterDeadlineIsIgnored", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		send := only[SendRenew](t, h.tick())
		only[Lost](t, h.tick())
		acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)})
		none[Renewed](t, acts)
		none[Acquired](t, acts)
	})
	t.Run("RenewalThatStallsNeverExtendsTrust", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		send := only[SendRenew](t, h.tick())
		h.advance(ttl - ttl/10) // the reply took almost a whole TTL
		acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)})
		only[Lost](t, acts)
		none[Renewed](t, acts)
	})
}

func TestSuspension(t *testing.T) {
	t.Parallel()
	t.Run("WallClockJumpRevokesAllAndRegenerates", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("a", 1, time.Millisecond)
		h.acquire("b", 2, time.Millisecond)
		before := h.e.Holder()
		// A paused VM: the monotonic clock stood still, the wall clock was
		// re-synced on wake.
		h.now.Wall = h.now.Wall.Add(5 * time.Second)
		acts := h.step(Tick{})
		var reasons []Reason
		for _, a := range acts {
			if l, ok := a.(Lost); ok {
				reasons = append(reasons, l.Reason)
			}
		}
		require.Equal(t, []Reason{ReasonSuspended, ReasonSuspended}, reasons)
		id := only[IdentityChanged](t, acts)
		require.NotEqual(t, before, id.Holder)
		require.Equal(t, id.Holder, h.e.Holder())
	})
	t.Run("SmallSkewIsTolerated", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("a", 1, time.Millisecond)
		h.now.Wall = h.now.Wall.Add(tol)
		none[Lost](t, h.step(Tick{}))
	})
	t.Run("LateTickRevokes", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("a", 1, time.Millisecond)
		due, ok := h.e.Next()
		require.True(t, ok)
		// SIGSTOP: both clocks ran, the timer fired far too late but still
		// before the deadline.
		h.advance(due - h.now.Mono + tol + time.Millisecond)
		acts := h.step(Tick{Timer: true, Due: due})
		require.Equal(t, ReasonSuspended, only[Lost](t, acts).Reason)
		only[IdentityChanged](t, acts)
		none[SendRenew](t, acts)
	})
	t.Run("LateTickWithNothingHeldChangesNothing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		require.Empty(t, h.step(Tick{Timer: true, Due: h.now.Mono - time.Minute}))
	})
}

func TestProgressStallStopsRenewals(t *testing.T) {
	t.Parallel()
	const bound = 15 * time.Second
	h := newHarness(t, func(c *Config) { c.ProgressTimeout = bound })
	a := h.acquire("billing", 7, time.Millisecond)
	send := only[SendRenew](t, h.tick())
	h.step(Progress{Name: "billing", Token: 7, At: h.now})
	progressAt := h.now.Mono
	h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)})
	send = only[SendRenew](t, h.tick())
	h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)})
	acts := h.tick()
	lost := only[Lost](t, acts)
	require.Equal(t, ReasonProgressStalled, lost.Reason)
	require.Equal(t, progressAt+bound, h.now.Mono)
	require.Equal(t, a.Token, lost.Token)
	none[SendRelease](t, acts) // the wedged work still runs: the lease expires by its TTL
	_, ok := h.e.Next()
	require.False(t, ok, "nothing is renewed after the stall")
}

func TestSeqMismatchRevokesRegeneratesAndFollows(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acquire("billing", 7, time.Millisecond)
	h.acquire("other", 8, time.Millisecond)
	before := h.e.Holder()
	send := only[SendRenew](t, h.tick())
	require.Len(t, send.Items, 2, "both leases travel in one batch")
	out := renewedAll(send.Items)
	// A clone renewed "billing" first: same holder and token, seq moved on.
	out[0] = store.RenewResult{Grant: store.Grant{Holder: before, Token: 7, Seq: 2, Remaining: ttl}}
	acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: out})
	var lost []Lost
	for _, a := range acts {
		if l, ok := a.(Lost); ok {
			lost = append(lost, l)
		}
	}
	require.Len(t, lost, 2, "a clone taints every lease of the identity")
	for _, l := range lost {
		require.Equal(t, ReasonSeqMismatch, l.Reason)
	}
	none[SendRelease](t, acts) // the sibling keeps the lease
	require.NotEqual(t, before, only[IdentityChanged](t, acts).Holder)

	// As a follower it campaigns with the new identity.
	send2 := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	require.Equal(t, h.e.Holder(), send2.Holder)
}

func TestSupersededAndExpiredAtStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		current store.Grant
		want    Reason
	}{
		{"OtherHolder", store.Grant{Holder: store.Holder{Label: "worker", Instance: "someone"}, Token: 9, Seq: 1, Remaining: ttl}, ReasonSuperseded},
		{"ReleasedByOperator", store.Grant{Token: 7}, ReasonExpiredAtStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.acquire("billing", 7, time.Millisecond)
			send := only[SendRenew](t, h.tick())
			acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: []store.RenewResult{{Grant: tc.current}}})
			require.Equal(t, tc.want, only[Lost](t, acts).Reason)
			none[SendRelease](t, acts)
			none[IdentityChanged](t, acts)
		})
	}
}

func TestChainWritesAndRenewalsNeverOverlap(t *testing.T) {
	t.Parallel()
	t.Run("GrantedAtOnceBetweenRenewals", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		g := only[ChainWriteGranted](t, h.step(ChainWriteBegin{Name: "billing", Token: 7}))
		require.Equal(t, int64(1), g.Seq)
	})
	t.Run("WaitsForTheRenewalInFlight", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		send := only[SendRenew](t, h.tick())
		require.Empty(t, h.step(ChainWriteBegin{Name: "billing", Token: 7}))
		acts := h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Results: renewedAll(send.Items)})
		require.Equal(t, int64(2), only[ChainWriteGranted](t, acts).Seq, "the write presents the renewed seq")
	})
	t.Run("RenewalWaitsForTheWrite", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		only[ChainWriteGranted](t, h.step(ChainWriteBegin{Name: "billing", Token: 7}))
		h.advance(renew)
		none[SendRenew](t, h.step(Tick{}))
		acts := h.step(ChainWriteEnd{Name: "billing", Token: 7, Seq: 2})
		require.Equal(t, int64(2), only[SendRenew](t, acts).Items[0].Seq, "the renewal carries the committed seq")
	})
	t.Run("OverdueRenewalGoesFirst", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		only[ChainWriteGranted](t, h.step(ChainWriteBegin{Name: "billing", Token: 7}))
		h.advance(renew)
		h.step(ChainWriteEnd{Name: "billing", Token: 7, Seq: 2})
		// Back-to-back writes cannot starve the renewal.
		acts := h.step(ChainWriteBegin{Name: "billing", Token: 7})
		none[ChainWriteGranted](t, acts)
	})
	t.Run("AWriteThatNeverEndsCostsTheTenure", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		a := h.acquire("billing", 7, time.Millisecond)
		only[ChainWriteGranted](t, h.step(ChainWriteBegin{Name: "billing", Token: 7}))
		acts := h.tick()
		require.Equal(t, ReasonExpiredLocally, only[Lost](t, acts).Reason)
		require.Equal(t, a.Deadline, h.now.Mono)
	})
}

func TestFollowerRetriesAtExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	remaining := 12 * time.Second
	other := store.Holder{Label: "worker", Instance: "other"}
	acts := h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt, Held: &store.HeldError{Holder: other, Token: 3, Seq: 4, Remaining: remaining}})
	require.Empty(t, acts, "a campaign keeps quiet while it waits")
	due, ok := h.e.Next()
	require.True(t, ok)
	require.Equal(t, h.now.Mono+remaining+spread/2, due, "retry at the holder's expiry, spread by at most 10 ms")

	t.Run("NotificationOfAnotherLeaseChangesNothing", func(t *testing.T) {
		h.step(Notified{store.Notice{Name: "payroll"}})
		still, _ := h.e.Next()
		require.Equal(t, due, still)
	})

	t.Run("NotificationBringsItForward", func(t *testing.T) {
		h.step(Notified{store.Notice{Name: "billing"}})
		due, _ := h.e.Next()
		require.Equal(t, h.now.Mono+spread/2, due)
	})
}

// TestResubscriptionRetriesEveryCampaign: an empty notification (the
// store's listener has just subscribed and may have missed releases)
// brings every waiting campaign forward, not one name.
func TestResubscriptionRetriesEveryCampaign(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	other := store.Holder{Label: "worker", Instance: "other"}
	for _, name := range []string{"billing", "payroll"} {
		send := only[SendAcquire](t, h.step(Want{Name: name, Campaign: true}))
		h.step(AcquireDone{Name: name, Holder: send.Holder, SentAt: send.SentAt, Held: &store.HeldError{Holder: other, Token: 3, Seq: 4, Remaining: 12 * time.Second}})
	}
	h.step(Notified{})
	due, ok := h.e.Next()
	require.True(t, ok)
	require.Equal(t, h.now.Mono+spread/2, due)
	var names []string
	for _, a := range h.tick() {
		if send, ok := a.(SendAcquire); ok {
			names = append(names, send.Name)
		}
	}
	require.ElementsMatch(t, []string{"billing", "payroll"}, names)
}

func TestOneShotAcquireReportsHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing"}))
	held := &store.HeldError{Holder: store.Holder{Label: "worker", Instance: "other"}, Token: 3, Seq: 4, Remaining: time.Second}
	failed := only[AcquireFailed](t, h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt, Held: held}))
	require.Equal(t, held, failed.Held)
	_, ok := h.e.Next()
	require.False(t, ok, "a one-shot attempt does not retry")
}

func TestHeldBySelfUnseenRegeneratesIdentity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	acts := h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
		Held: &store.HeldError{Holder: send.Holder, Token: 3, Seq: 1, Remaining: time.Second}})
	require.NotEqual(t, send.Holder, only[IdentityChanged](t, acts).Holder, "a grant nobody saw is never adopted")
	retry := only[SendAcquire](t, h.tick())
	require.Equal(t, h.e.Holder(), retry.Holder)
}

func TestErrorsBackOffNeverSpin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	var waits []time.Duration
	for range 8 {
		h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt, Err: errStore})
		before := h.now.Mono
		send = only[SendAcquire](t, h.tick())
		waits = append(waits, h.now.Mono-before)
	}
	for i, w := range waits {
		require.Positive(t, w, "attempt %d came at once", i)
		require.LessOrEqual(t, w, renew, "backoff is capped at the renew interval")
		if i > 0 {
			require.GreaterOrEqual(t, w, waits[i-1], "backoff never shrinks")
		}
	}
	require.Equal(t, renew/16+renew/32, waits[0])
	require.Equal(t, renew/2+renew/4, waits[len(waits)-1])
}

func TestPermanentErrorEndsCampaign(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	acts := h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt, Err: errStore, Permanent: true})
	require.ErrorIs(t, only[AcquireFailed](t, acts).Err, errStore)
	_, ok := h.e.Next()
	require.False(t, ok)
}

func TestUnwantWhileInFlightReleasesTheGrant(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	h.step(Unwant{Name: "billing"})
	acts := h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
		Grant: &store.Grant{Holder: send.Holder, Token: 5, Seq: 1, Remaining: ttl}})
	none[Acquired](t, acts)
	require.Equal(t, store.Token(5), only[SendRelease](t, acts).Token)
}

func TestRevokeDropsEverythingAndKeepsCampaigning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acquire("held", 1, time.Millisecond)
	only[SendAcquire](t, h.step(Want{Name: "waiting", Campaign: true}))
	before := h.e.Holder()
	acts := h.step(Revoke{})
	require.Equal(t, ReasonRevoked, only[Lost](t, acts).Reason)
	none[SendRelease](t, acts) // a restored copy must not release what the other copy may hold
	only[IdentityChanged](t, acts)
	// The in-flight acquisition was sent with the retired identity: its grant
	// is given back and the campaign retries with the new one.
	acts = h.step(AcquireDone{Name: "waiting", Holder: before, SentAt: h.now,
		Grant: &store.Grant{Holder: before, Token: 2, Seq: 1, Remaining: ttl}})
	none[Acquired](t, acts)
	rel := only[SendRelease](t, acts)
	require.Equal(t, before, rel.Holder)
	none[SendAcquire](t, acts) // not before the release is answered
	acts = h.step(ReleaseDone{Name: rel.Name, Token: rel.Token})
	require.Equal(t, h.e.Holder(), only[SendAcquire](t, acts).Holder)
}

func TestNewAttemptWaitsForTheOldRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 7, time.Millisecond)
	h.step(Drop{Name: "billing", Token: 7, Reason: ReasonExpiredLocally})
	rel := only[SendRelease](t, h.step(Release{Name: "billing", Holder: a.Holder, Token: 7}))
	none[SendAcquire](t, h.step(Want{Name: "billing"}))
	require.True(t, only[AcquireFailed](t, h.step(Want{Name: "billing"})).Busy, "one outstanding want per name")
	acts := h.step(ReleaseDone{Name: "billing", Token: rel.Token})
	require.Equal(t, h.e.Holder(), only[SendAcquire](t, acts).Holder)
}

func TestSecondWantForSameNameIsBusy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.acquire("billing", 1, time.Millisecond)
	require.True(t, only[AcquireFailed](t, h.step(Want{Name: "billing"})).Busy)
}

func TestBatchesConvergeToOneRoundTripPerInterval(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 50 {
		h.acquire(fmt.Sprintf("lease-%02d", i), store.Token(i+1), time.Millisecond)
		h.advance(renew / 100)
	}
	start := h.now.Mono
	var sends int
	for h.now.Mono < start+5*renew {
		acts := h.tick()
		for _, a := range acts {
			if s, ok := a.(SendRenew); ok {
				sends++
				h.advance(time.Millisecond)
				h.step(RenewDone{SentAt: s.SentAt, Items: s.Items, Results: renewedAll(s.Items)})
			}
		}
		none[Lost](t, acts)
	}
	require.LessOrEqual(t, sends, 6, "50 leases need about one batch per interval, not one call each")
}

func TestProgressReportedAtTheBoundCounts(t *testing.T) {
	t.Parallel()
	const bound = 15 * time.Second
	h := newHarness(t, func(c *Config) { c.ProgressTimeout = bound })
	h.acquire("billing", 7, 0)
	h.advance(bound)
	none[Lost](t, h.step(Progress{Name: "billing", Token: 7, At: h.now}))
}

func TestReleaseOfAHeldTenureEndsItAndGivesItBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 4, time.Millisecond)
	acts := h.step(Release{Name: "billing", Holder: a.Holder, Token: 4})
	require.Equal(t, ReasonReleased, only[Lost](t, acts).Reason)
	require.Equal(t, SendRelease{Name: "billing", Holder: a.Holder, Token: 4}, only[SendRelease](t, acts))
	none[SendRelease](t, h.step(Release{Name: "billing", Holder: a.Holder, Token: 4}))
}

// TestReleaseAfterLossHoldsBackTheNextAttempt: the owner of a tenure lost
// to a failed renewal releases it once its work stopped (the lease may
// still be this holder's at the store); a campaign for the name waits for
// that release to be answered, so it never races it.
func TestReleaseAfterLossHoldsBackTheNextAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 4, time.Millisecond)
	send := only[SendRenew](t, h.tick())
	require.Equal(t, ReasonRenewError, only[Lost](t, h.step(RenewDone{SentAt: send.SentAt, Items: send.Items, Err: errStore})).Reason)

	rel := only[SendRelease](t, h.step(Release{Name: "billing", Holder: a.Holder, Token: 4}))
	require.Equal(t, store.Token(4), rel.Token)
	none[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
	_, armed := h.e.Next()
	require.False(t, armed, "no attempt is due before the release is answered")
	acts := h.step(ReleaseDone{Name: "billing", Token: 4, Err: errStore})
	require.Equal(t, "billing", only[SendAcquire](t, acts).Name, "answered, even with an error: the name is free")
}

// TestReleaseOfAnOldTenureLeavesTheNewOneAlone: releasing a tenure that a
// newer one of the same name replaced is sent (the store refuses it: the
// token does not match) and changes nothing here.
func TestReleaseOfAnOldTenureLeavesTheNewOneAlone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 9, time.Millisecond)
	acts := h.step(Release{Name: "billing", Holder: a.Holder, Token: 8})
	require.Equal(t, store.Token(8), only[SendRelease](t, acts).Token)
	none[Lost](t, acts)
	h.step(ReleaseDone{Name: "billing", Token: 8})
	require.Equal(t, store.Token(9), only[SendRenew](t, h.tick()).Items[0].Token, "the newer tenure is still held and renewed")
}

// TestAnnouncementMakesTheHolderCheck: a holder whose lease the store
// announces as released or taken over (an operator's forced release) asks
// the store at once, and learns of its loss within a round trip.
func TestAnnouncementMakesTheHolderCheck(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		rec  store.Record
		lost Reason
	}{
		"Released":  {store.Record{Grant: store.Grant{Name: "billing", Token: 3}, State: store.StateReleased}, ReasonExpiredAtStore},
		"TakenOver": {store.Record{Grant: store.Grant{Name: "billing", Holder: store.Holder{Label: "w", Instance: "other"}, Token: 4, Seq: 1}, State: store.StateHeld}, ReasonSuperseded},
		"Lost":      {store.Record{}, ReasonExpiredAtStore},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			a := h.acquire("billing", 3, time.Millisecond)
			check := only[SendCheck](t, h.step(Notified{store.Notice{Name: "billing"}}))
			require.Equal(t, SendCheck{Name: "billing", Holder: a.Holder, Token: 3}, check)
			none[SendCheck](t, h.step(Notified{store.Notice{Name: "billing"}})) // one check at a time
			require.Equal(t, tc.lost, only[Lost](t, h.step(CheckDone{Name: "billing", Token: 3, Record: tc.rec})).Reason)
		})
	}
}

// TestAnnouncementDuringACheckIsCheckedAgain: the store may answer a
// check before the change a later announcement reports (an operator
// deletes the lease while a check of an earlier notice is on its way).
// The holder checks once more when the first check is back, and learns
// of the loss then, not at its next renewal.
func TestAnnouncementDuringACheckIsCheckedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 3, time.Millisecond)
	check := only[SendCheck](t, h.step(Notified{}))
	none[SendCheck](t, h.step(Notified{store.Notice{Name: "billing"}}))
	none[SendCheck](t, h.step(Notified{store.Notice{Name: "billing"}}))
	still := store.Record{Grant: store.Grant{Name: "billing", Holder: a.Holder, Token: 3, Seq: 1, Remaining: ttl}, State: store.StateHeld}
	again := only[SendCheck](t, h.step(CheckDone{Name: check.Name, Token: check.Token, Record: still}))
	require.Equal(t, check, again, "one more check for the two announcements heard meanwhile")
	require.Equal(t, ReasonExpiredAtStore, only[Lost](t, h.step(CheckDone{Name: "billing", Token: 3, Record: store.Record{}})).Reason)

	// A check that comes back with nothing heard meanwhile is the last.
	h = newHarness(t)
	a = h.acquire("billing", 3, time.Millisecond)
	check = only[SendCheck](t, h.step(Notified{store.Notice{Name: "billing"}}))
	still.Holder = a.Holder
	require.Empty(t, h.step(CheckDone{Name: check.Name, Token: check.Token, Record: still}))
}

// TestTheEchoOfItsOwnGrantChangesNothing: the store announces every
// takeover, this holder's own included; the check finds it still holding,
// and nothing changes, not even the renewal chain.
func TestTheEchoOfItsOwnGrantChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := h.acquire("billing", 3, time.Millisecond)
	due, _ := h.e.Next()
	check := only[SendCheck](t, h.step(Notified{}))
	rec := store.Record{Grant: store.Grant{Name: "billing", Holder: a.Holder, Token: 3, Seq: 1, Remaining: ttl}, State: store.StateHeld}
	require.Empty(t, h.step(CheckDone{Name: check.Name, Token: check.Token, Record: rec}))
	still, _ := h.e.Next()
	require.Equal(t, due, still, "the next renewal is where it was")
	require.Empty(t, h.step(CheckDone{Name: "billing", Token: 3, Err: errStore}), "a failed check proves nothing")
}

// A store whose wall clock stepped forward between two renewals expires
// its leases early: the holder stands down at the renewal that shows it,
// and keeps the tenure when the store's clock only kept pace.
func TestStoreClockAheadEndsTheTenure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		ahead time.Duration // how far the store's clock ran beyond real time
		lost  bool
	}{
		{"KeptPace", 0, false},
		{"WithinTolerance", tol, false},
		{"SteppedForward", tol + time.Millisecond, true},
		{"SteppedBack", -time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			storeAt := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
			h.advance(time.Millisecond)
			only[Acquired](t, h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
				Grant: &store.Grant{Holder: send.Holder, Token: 7, Seq: 1, Remaining: ttl, At: storeAt}}))
			renewal := only[SendRenew](t, h.tick())
			h.advance(time.Millisecond)
			results := renewedAll(renewal.Items)
			// The store read its clock somewhere between the two sends and
			// the reply: at most now - acquire's send time later, honestly.
			results[0].Grant.At = storeAt.Add(h.now.Mono - send.SentAt.Mono + tc.ahead)
			acts := h.step(RenewDone{SentAt: renewal.SentAt, Items: renewal.Items, Results: results})
			if !tc.lost {
				only[Renewed](t, acts)
				return
			}
			lost := only[Lost](t, acts)
			require.Equal(t, ReasonStoreClockAhead, lost.Reason)
			require.True(t, lost.Reason.Releasable(), "the renewal succeeded: the lease is still this holder's to release")
		})
	}
}

// TestFollowersInLine: what a waiting campaign does with its place in the
// store's line and with each kind of announcement.
func TestFollowersInLine(t *testing.T) {
	t.Parallel()
	other := store.Holder{Label: "worker", Instance: "other"}
	const remaining = 12 * time.Second
	// waiting returns a harness whose campaign for "billing" was refused
	// with place.
	waiting := func(t *testing.T, place int) *harness {
		h := newHarness(t)
		send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
		require.True(t, send.Wait, "a campaign asks to wait in line")
		h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Held: &store.HeldError{Holder: other, Token: 3, Seq: 4, Remaining: remaining, Position: place}})
		return h
	}
	next := func(h *harness) time.Duration {
		due, ok := h.e.Next()
		require.True(h.t, ok)
		return due - h.now.Mono
	}
	for _, tc := range []struct {
		name   string
		place  int
		notice func(h *harness) store.Notice
		want   time.Duration
	}{
		{"NextInLineRetriesAtTheExpiry", 1, nil, remaining},
		{"OthersStayBackForTheHandoff", 2, nil, remaining + store.Handoff + spread/2},
		{"NoLineSpreads", 0, nil, remaining + spread/2},
		{"ReleaseNamingThisFollower", 2, func(h *harness) store.Notice {
			return store.Notice{Name: "billing", Kind: store.NoticeReleased, Next: h.e.Holder()}
		}, 0},
		{"ReleaseNamingAnother", 1, func(*harness) store.Notice {
			return store.Notice{Name: "billing", Kind: store.NoticeReleased, Next: other}
		}, store.Handoff + spread/2},
		{"ReleaseWithoutLine", 1, func(*harness) store.Notice {
			return store.Notice{Name: "billing", Kind: store.NoticeReleased}
		}, spread / 2},
		{"ChangeFirstInLine", 1, func(*harness) store.Notice { return store.Notice{Name: "billing"} }, 0},
		{"ChangeBehindTheHead", 2, func(*harness) store.Notice { return store.Notice{Name: "billing"} }, spread / 2},
		{"NewTenureWaitsForItsExpiryOnePlaceUp", 2, func(*harness) store.Notice {
			return store.Notice{Name: "billing", Kind: store.NoticeAcquired, Holder: other, Remaining: 20 * time.Second}
		}, 20 * time.Second},
		{"AnotherLeaseIsNoConcern", 1, func(*harness) store.Notice {
			return store.Notice{Name: "payroll", Kind: store.NoticeReleased}
		}, remaining},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := waiting(t, tc.place)
			if tc.notice == nil {
				require.Equal(t, tc.want, next(h))
				return
			}
			acts := h.step(Notified{tc.notice(h)})
			if tc.want == 0 {
				only[SendAcquire](t, acts)
				return
			}
			none[SendAcquire](t, acts)
			require.Equal(t, tc.want, next(h))
		})
	}

	t.Run("ReleaseHeardWhileAcquiringIsHeardAfterTheRefusal", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
		h.advance(time.Millisecond)
		none[SendAcquire](t, h.step(Notified{store.Notice{Name: "billing", Kind: store.NoticeReleased, Next: send.Holder}}))
		h.advance(time.Millisecond)
		// The store refused before the release it announced.
		retry := only[SendAcquire](t, h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Held: &store.HeldError{Holder: other, Token: 3, Seq: 4, Remaining: remaining, Position: 1}}))
		require.Equal(t, send.Holder, retry.Holder, "the follower the release named tries at once")
	})

	t.Run("NewTenureHeardWhileAcquiringIsCountedOnce", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		send := only[SendAcquire](t, h.step(Want{Name: "billing", Campaign: true}))
		h.advance(time.Millisecond)
		none[SendAcquire](t, h.step(Notified{store.Notice{Name: "billing", Kind: store.NoticeAcquired, Holder: other, Remaining: remaining}}))
		h.advance(time.Millisecond)
		// The refusal comes from the tenure just announced: the place it
		// gives already counts it.
		none[SendAcquire](t, h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Held: &store.HeldError{Holder: other, Token: 3, Seq: 1, Remaining: remaining, Position: 2}}))
		require.Equal(t, remaining+store.Handoff+spread/2, next(h), "second in line stays back for the handoff")
	})

	t.Run("OwnTenuresAnnouncementNeedsNoCheck", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		a := h.acquire("billing", 7, time.Millisecond)
		none[SendCheck](t, h.step(Notified{store.Notice{Name: "billing", Kind: store.NoticeAcquired, Holder: a.Holder, Remaining: ttl}}))
		only[SendCheck](t, h.step(Notified{store.Notice{Name: "billing", Kind: store.NoticeAcquired, Holder: other, Remaining: ttl}}))
	})
}

// first returns the index in acts of the first action of type A, failing
// when there is none.
func first[A Action](t *testing.T, acts []Action) int {
	t.Helper()
	for i, a := range acts {
		if _, ok := a.(A); ok {
			return i
		}
	}
	t.Fatalf("no %T in %#v", *new(A), acts)
	return -1
}

// TestFollowsWhatItTracks: the engine follows a name before the first
// store call for it, and unfollows it only once it neither wants, holds
// nor releases it.
func TestFollowsWhatItTracks(t *testing.T) {
	t.Parallel()
	other := store.Holder{Label: "worker", Instance: "other"}

	t.Run("AcquiredReleasedAndWantedAgain", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		acts := h.step(Want{Name: "billing", Campaign: true})
		require.Equal(t, Follow{Name: "billing"}, only[Follow](t, acts))
		require.Less(t, first[Follow](t, acts), first[SendAcquire](t, acts))
		send := only[SendAcquire](t, acts)
		acts = h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Held: &store.HeldError{Holder: other, Token: 3, Seq: 1, Remaining: ttl}})
		none[Unfollow](t, acts) // the campaign waits
		send = only[SendAcquire](t, h.tick())
		h.advance(time.Millisecond)
		a := only[Acquired](t, h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Grant: &store.Grant{Holder: send.Holder, Token: 4, Seq: 1, Remaining: ttl}}))

		acts = h.step(Release{Name: "billing", Holder: a.Holder, Token: a.Token})
		rel := only[SendRelease](t, acts)
		none[Unfollow](t, acts) // the release is in flight
		require.True(t, h.e.Tracks("billing"))
		acts = h.step(ReleaseDone{Name: "billing", Token: rel.Token})
		require.Equal(t, Unfollow{Name: "billing"}, acts[len(acts)-1])
		require.False(t, h.e.Tracks("billing"))

		acts = h.step(Want{Name: "billing"})
		require.Less(t, first[Follow](t, acts), first[SendAcquire](t, acts))
		require.True(t, h.e.Tracks("billing"))
	})

	t.Run("WantedWhileReleasing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		a := h.acquire("billing", 7, time.Millisecond)
		rel := only[SendRelease](t, h.step(Release{Name: "billing", Holder: a.Holder, Token: 7}))
		none[Unfollow](t, h.step(Want{Name: "billing", Campaign: true}))
		acts := h.step(ReleaseDone{Name: "billing", Token: rel.Token})
		none[Unfollow](t, acts)
		only[SendAcquire](t, acts)
	})

	t.Run("OneShotRefused", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		send := only[SendAcquire](t, h.step(Want{Name: "billing"}))
		acts := h.step(AcquireDone{Name: "billing", Holder: send.Holder, SentAt: send.SentAt,
			Held: &store.HeldError{Holder: other, Token: 3, Seq: 1, Remaining: ttl}})
		only[AcquireFailed](t, acts)
		require.Equal(t, Unfollow{Name: "billing"}, acts[len(acts)-1])
	})

	t.Run("Adopted", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		acts := h.step(Adopt{Name: "billing", Holder: store.Holder{Label: "worker", Instance: "parent"}, Token: 7, Seq: 3, Remaining: ttl})
		require.Equal(t, Follow{Name: "billing"}, only[Follow](t, acts))
		require.Less(t, first[Follow](t, acts), first[Acquired](t, acts))
		require.Less(t, first[Follow](t, acts), first[SendRenew](t, acts))
	})

	t.Run("Lost", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.acquire("billing", 7, time.Millisecond)
		h.acquire("payroll", 8, time.Millisecond)
		acts := h.step(Drop{Name: "billing", Token: 7, Reason: ReasonExpiredLocally})
		only[Lost](t, acts)
		require.Equal(t, Unfollow{Name: "billing"}, only[Unfollow](t, acts))
		require.True(t, h.e.Tracks("payroll"))
	})
}
