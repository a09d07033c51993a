package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// batchOf asks for names for h; with wait, every other one waits in line
// if refused.
func batchOf(names []string, h store.Holder, wait bool) []store.AcquireParams {
	ps := make([]store.AcquireParams, len(names))
	for i, name := range names {
		ps[i] = store.AcquireParams{Name: name, Holder: h, TTL: time.Minute, Wait: wait && i%2 == 0}
	}
	return ps
}

func leaseNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return names
}

// TestAcquireBatchRacesGrantEachLeaseOnce: batches of several processes
// over the same leases, each in its own order, half of the leases new and
// half released before, every round: each lease goes to exactly one of
// them with a token of its own, and no batch fails (no deadlock between
// batches, no error on rows inserted or locked meanwhile).
func TestAcquireBatchRacesGrantEachLeaseOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	const racers, rounds, n = 4, 5, 120
	seen := map[store.Token]string{}
	for round := range rounds {
		names := leaseNames(fmt.Sprintf("r%d", round), n)
		for _, name := range names[:n/2] { // rows that exist and are free
			g := b.acquire(t, name, testutil.Holder(t, "before"), time.Minute)
			require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: name, Holder: g.Holder, Token: g.Token}))
			seen[g.Token] = "before " + name
		}
		results := make([][]store.AcquireResult, racers)
		batches := make([][]store.AcquireParams, racers)
		var wg sync.WaitGroup
		for i := range racers {
			order := slices.Clone(names)
			rand.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
			batches[i] = batchOf(order, testutil.Holder(t, fmt.Sprintf("racer-%d", i)), true)
			wg.Go(func() {
				var err error
				results[i], err = b.store.AcquireBatch(ctx, batches[i])
				require.NoError(t, err)
			})
		}
		wg.Wait()
		winners := map[string]store.Holder{}
		for i, rs := range results {
			require.Len(t, rs, n)
			for j, r := range rs {
				p := batches[i][j]
				if r.Err != nil {
					var held *store.HeldError
					require.ErrorAs(t, r.Err, &held, "%s: a lease is granted or refused", p.Name)
					continue
				}
				require.Equal(t, p.Holder, r.Grant.Holder)
				_, dup := winners[p.Name]
				require.False(t, dup, "%s was granted twice in round %d", p.Name, round)
				winners[p.Name] = p.Holder
				prev, reused := seen[r.Grant.Token]
				require.False(t, reused, "token %d of %s was granted before (%s)", r.Grant.Token, p.Name, prev)
				seen[r.Grant.Token] = p.Name
			}
		}
		require.Len(t, winners, n, "every lease was granted in round %d", round)
		for _, name := range names {
			rec, err := b.store.Get(ctx, name)
			require.NoError(t, err)
			require.Equal(t, winners[name], rec.Holder, "the store agrees on the holder of %s", name)
		}
	}
}

// TestAcquireBatchTokensSkipNothing: the token sequence is read only for
// leases a batch takes or creates, so the tokens of a batch are
// consecutive, and a refused batch leaves the sequence where it was.
func TestAcquireBatchTokensSkipNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	names := leaseNames("job", 100)
	tokens := func(rs []store.AcquireResult) []store.Token {
		var ts []store.Token
		for _, r := range rs {
			require.NoError(t, r.Err)
			ts = append(ts, r.Grant.Token)
		}
		slices.Sort(ts)
		return ts
	}
	consecutive := func(ts []store.Token, from store.Token, why string) {
		for i, tok := range ts {
			require.Equal(t, from+store.Token(i), tok, why)
		}
	}

	first, err := b.store.AcquireBatch(ctx, batchOf(names, testutil.Holder(t, "first"), false))
	require.NoError(t, err)
	ts := tokens(first)
	consecutive(ts, ts[0], "new leases")

	refused, err := b.store.AcquireBatch(ctx, batchOf(names, testutil.Holder(t, "refused"), false))
	require.NoError(t, err)
	for _, r := range refused {
		require.ErrorIs(t, r.Err, store.ErrHeld)
	}
	for i, r := range first {
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: names[i], Holder: r.Grant.Holder, Token: r.Grant.Token}))
	}
	second, err := b.store.AcquireBatch(ctx, batchOf(names, testutil.Holder(t, "second"), false))
	require.NoError(t, err)
	consecutive(tokens(second), ts[len(ts)-1]+1, "released leases taken again, after a refused batch")
}

// TestAcquireBatchAnnouncesInFewNotifications: a batch announces its
// acquisitions as JSON arrays, each notification under PostgreSQL's limit
// of 8,000 bytes, rather than one notification per lease; every
// acquisition is in one of them.
func TestAcquireBatchAnnouncesInFewNotifications(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	conn, err := b.owner.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{b.store.Objects().Channel}.Sanitize())
	require.NoError(t, err)

	const n = 1000
	names := leaseNames("announced-with-a-longer-name-to-fill-the-payload", n)
	res, err := b.store.AcquireBatch(ctx, batchOf(names, testutil.Holder(t, "many"), false))
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}

	heard := map[string]bool{}
	notifications := 0
	for len(heard) < n {
		wctx, cancel := context.WithTimeout(ctx, eventTimeout)
		msg, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		require.NoError(t, err, "heard %d of %d acquisitions", len(heard), n)
		require.Less(t, len(msg.Payload), 8000)
		notifications++
		for _, notice := range storekit.DecodeNotices(msg.Payload) {
			require.Equal(t, store.NoticeAcquired, notice.Kind)
			heard[notice.Name] = true
		}
	}
	require.Less(t, notifications, n/10, "a thousand acquisitions in a few notifications")
}

// TestAcquireBatchBeforeMigration009: on a schema migrated only up to 008
// of the numbering before v0.1.0,
// a batch fails with ErrNotMigrated (naming the fix) and a lone
// acquisition still works, as the package documentation says.
func TestAcquireBatchBeforeMigration009(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, false)
	ctx := t.Context()
	require.NoError(t, pgstore.LegacyMigrateTo(ctx, b.store, 8))
	h := testutil.Holder(t, "older-schema")
	_, err := b.store.AcquireBatch(ctx, batchOf(leaseNames("batch", 2), h, false))
	require.ErrorIs(t, err, store.ErrNotMigrated)
	require.ErrorContains(t, err, "tenure migrate")
	b.acquire(t, "alone", h, time.Minute)
}
