package k8sstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// runClient runs a client on s, with a TTL of 30 s renewed every 10 s,
// until the test ends.
func runClient(t *testing.T, s store.Store, label string) *tenure.Client {
	t.Helper()
	c, err := tenure.New(s, tenure.Config{Label: label, TTL: 30 * time.Second, RenewInterval: 10 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // Run returns nil once ctx ends.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// TestHolderStandsDownWhenItsObjectIsDeleted: an operator deletes the
// Lease object of a held lease (kubectl delete lease). The holder hears
// it on its watch and stands down at once, not at its next renewal ten
// seconds on, so that the next holder, which finds no object and starts
// the lease anew with a greater token, is never beside it.
func TestHolderStandsDownWhenItsObjectIsDeleted(t *testing.T) {
	t.Parallel()
	h := harness(t)
	s, leases, cfg := h.New(t)
	next, err := k8sstore.New(leases, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Close() })
	ctx := t.Context()
	name := testutil.UniqueName(t)

	holder := runClient(t, s, "holder")
	l, err := holder.Acquire(ctx, name)
	require.NoError(t, err)
	first := l.Token()

	deleted := time.Now()
	require.NoError(t, leases.Delete(ctx, k8sstore.ObjectName(cfg.Prefix, name), metav1.DeleteOptions{}))
	// Far below the renew interval: a holder that learnt it from its next
	// renewal would stand down about 10 s after its acquisition.
	const bound = 3 * time.Second
	select {
	case <-l.Done():
	case <-time.After(bound):
		t.Fatalf("the holder still held the lease %v after its object was deleted", bound)
	}
	t.Logf("the holder stood down %v after the deletion", time.Since(deleted))
	var lost *tenure.LostError
	require.ErrorAs(t, l.Err(), &lost)
	require.Equal(t, first, lost.Token)

	l2, err := runClient(t, next, "next").Acquire(ctx, name)
	require.NoError(t, err)
	require.Greater(t, l2.Token(), first, "the lease started anew above every token it had")
}
