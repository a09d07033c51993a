package redisfence_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/internal/snapshot"
	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/redisfence"
	"github.com/tenure-dev/tenure/store/redisstore"
)

// strictBundle is a lease store on the test's Redis prefix and a running
// client factory over it.
type strictBundle struct {
	*testBundle
	store *redisstore.Store
	keys  redisstore.Keys
	data  string
}

func setupStrict(t *testing.T) *strictBundle {
	t.Helper()
	b := setup(t)
	st, err := redisstore.New(b.client, redisstore.Config{KeyPrefix: b.prefix + "leases:"})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return &strictBundle{testBundle: b, store: st, keys: st.Keys(), data: b.prefix + "data"}
}

// runClient starts a tenure client over the bundle's store, stopped when
// the test ends.
func (b *strictBundle) runClient(t *testing.T, label string, ttl time.Duration) *tenure.Client {
	t.Helper()
	return runClientOver(t, b.store, label, ttl)
}

// unannounced is a store whose announcements a client does not hear: the
// embedded interface hides Listen.
type unannounced struct{ store.Store }

func runClientOver(t *testing.T, st store.Store, label string, ttl time.Duration) *tenure.Client {
	t.Helper()
	c, err := tenure.New(st, tenure.Config{Label: label, TTL: ttl})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	return c
}

func (b *strictBundle) write(t *testing.T, l *tenure.Lease, field, value string) error {
	t.Helper()
	return redisfence.StrictHSet(t.Context(), b.client, b.keys, l, b.data, map[string]string{field: value})
}

func (b *strictBundle) fields(t *testing.T) map[string]string {
	t.Helper()
	m, err := b.client.HGetAll(t.Context(), b.data).Result()
	require.NoError(t, err)
	return m
}

// requireChainRefused checks that err is the strict fence's refusal of l.
func requireChainRefused(t *testing.T, err error, l *tenure.Lease, want string) {
	t.Helper()
	tok := snapshot.Take(l).Token
	requireFenced(t, err, "lease:"+l.Name(), tok, tok)
	require.ErrorContains(t, err, want)
}

// TestStrictHSetInStepWithRenewals writes back to back for two TTLs: the
// renewals in between carry the seq the writes advanced, so the holder's
// own writes are never taken for a clone's.
func TestStrictHSetInStepWithRenewals(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	const ttl = 2 * time.Second
	l, err := b.runClient(t, "strict", ttl).Acquire(t.Context(), "job")
	require.NoError(t, err)
	n := 0
	for start := time.Now(); time.Since(start) < 2*ttl; n++ {
		require.NoError(t, b.write(t, l, "w"+strconv.Itoa(n), l.Token().String()), "write %d", n)
	}
	require.NoError(t, l.Err(), "the holder's own writes were taken for a clone's")
	require.Len(t, b.fields(t), n)
	// A renewal may be in flight at any moment; between two, the client and
	// the store agree.
	require.Eventually(t, func() bool {
		rec, err := b.store.Get(t.Context(), "job")
		return err == nil && rec.Seq == l.Seq()
	}, 10*ttl, time.Millisecond, "the client is in step with the chain")

	require.NoError(t, l.Release(t.Context()))
	require.ErrorIs(t, b.write(t, l, "late", "x"), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.fields(t), n)
}

// adoptClone starts a clone of l in a second client (the same holder,
// token and seq, as after a snapshot restored twice) and waits for the
// clone's first renewal, which its client sends at once: from then on the
// clone is at the head of the renewal chain and l, which cannot know it
// until its own next renewal a third of a minute later, is behind.
func (b *strictBundle) adoptClone(t *testing.T, l *tenure.Lease) *tenure.Lease {
	t.Helper()
	st := snapshot.Take(l)
	// The clone hears no announcements, as a restored copy whose listener
	// has not reconnected yet: what it learns, it learns from the store
	// when it writes.
	adopted, err := snapshot.Adopt(t.Context(), runClientOver(t, unannounced{b.store}, "restored", time.Minute), st)
	require.NoError(t, err)
	clone := adopted.(*tenure.Lease)
	require.Eventually(t, func() bool { return clone.Seq() > st.Seq || clone.Err() != nil }, 10*time.Second, time.Millisecond)
	require.NoError(t, clone.Err())
	return clone
}

// TestStrictHSetClones: of an original and its clone only the one at the
// head of the renewal chain writes; the server refuses the other, which
// still believes it holds the tenure.
func TestStrictHSetClones(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	original, err := b.runClient(t, "a", time.Minute).Acquire(t.Context(), "job")
	require.NoError(t, err)
	clone := b.adoptClone(t, original)
	require.Equal(t, original.Token(), clone.Token(), "a clone carries the very same token")

	requireChainRefused(t, b.write(t, original, "by", "original"), original, "a clone of this holder wrote first")
	require.NoError(t, b.write(t, clone, "by", "clone"))
	require.NoError(t, b.write(t, clone, "again", "clone"))
	requireChainRefused(t, b.write(t, original, "again", "original"), original, "a clone of this holder wrote first")
	require.Equal(t, map[string]string{"by": "clone", "again": "clone"}, b.fields(t))
}

// TestStrictHSetNotHeld: a holder that still believes in a tenure the
// store no longer holds (here a clone whose original released it) is
// refused by the server and writes nothing.
func TestStrictHSetNotHeld(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	original, err := b.runClient(t, "a", time.Minute).Acquire(t.Context(), "job")
	require.NoError(t, err)
	clone := b.adoptClone(t, original)
	require.NoError(t, original.Release(t.Context()))
	err = b.write(t, clone, "by", "clone")
	requireChainRefused(t, err, clone, "the lease is not held")
	require.Empty(t, b.fields(t))
}

// TestStrictHSetServerRefusal: a write the server refuses (the key holds a
// string) leaves the chain where it was, so the holder writes and renews
// on.
func TestStrictHSetServerRefusal(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	const ttl = 2 * time.Second
	l, err := b.runClient(t, "a", ttl).Acquire(t.Context(), "job")
	require.NoError(t, err)
	require.NoError(t, b.client.Set(t.Context(), b.data, "a string", 0).Err())
	err = b.write(t, l, "f", "v")
	require.ErrorContains(t, err, "WRONGTYPE")
	require.NotErrorIs(t, err, store.ErrFenced)
	require.NoError(t, b.client.Del(t.Context(), b.data).Err())
	require.NoError(t, b.write(t, l, "f", "v"))
	// Two renewals later the tenure is still the holder's.
	seq := l.Seq()
	require.Eventually(t, func() bool { return l.Seq() >= seq+2 || l.Err() != nil }, 10*ttl, ttl/20)
	require.NoError(t, l.Err())
	require.NoError(t, b.write(t, l, "g", "w"))
}

func TestStrictHSetInvalid(t *testing.T) {
	t.Parallel()
	b := setupStrict(t)
	l, err := b.runClient(t, "a", time.Minute).Acquire(t.Context(), "job")
	require.NoError(t, err)
	seq := l.Seq()
	many := map[string]string{}
	for i := range redisfence.MaxFields + 1 {
		many[strconv.Itoa(i)] = "v"
	}
	ctx := t.Context()
	one := map[string]string{"f": "v"}
	for name, err := range map[string]error{
		"nil client":     redisfence.StrictHSet(ctx, nil, b.keys, l, b.data, one),
		"nil lease":      redisfence.StrictHSet(ctx, b.client, b.keys, nil, b.data, one),
		"no lease keys":  redisfence.StrictHSet(ctx, b.client, redisstore.Keys{}, l, b.data, one),
		"empty key":      redisfence.StrictHSet(ctx, b.client, b.keys, l, "", one),
		"no fields":      redisfence.StrictHSet(ctx, b.client, b.keys, l, b.data, nil),
		"too many field": redisfence.StrictHSet(ctx, b.client, b.keys, l, b.data, many),
	} {
		require.ErrorIs(t, err, store.ErrInvalid, name)
		require.True(t, strings.HasPrefix(err.Error(), "redisfence: strict hset"), "%s: %v", name, err)
	}
	require.Empty(t, b.fields(t), "bad input writes nothing")
	require.Equal(t, seq, l.Seq(), "bad input leaves the chain alone")
	require.NoError(t, l.Err())
}
