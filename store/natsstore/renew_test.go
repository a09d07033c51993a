package natsstore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/natsserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/natsstore"
)

// TestRenewalAfterTTL: nats-server ends a key whose TTL ran out in two
// steps with no lock between (it decides to, then writes its expiry
// marker as a rollup of the key), so a renewal stored between them is
// acknowledged and then replaced. A renewal stored once the TTL of the
// write it replaces had run out may be caught so, and is never reported
// as renewed. The server looks for expired keys at most every 250 ms, so
// of renewals spread over the second after their leases' TTL ran out,
// the first find their keys still there and are stored.
func TestRenewalAfterTTL(t *testing.T) {
	t.Parallel()
	s, _ := natsserver.NatsHarness{Server: natsserver.SharedNats(t)}.New(t)
	holder := testutil.Holder(t, "holder")
	base := testutil.UniqueName(t)
	grants := make([]store.Grant, 100)
	written := make([]time.Time, len(grants))
	for i := range grants {
		grants[i] = acquire(t, s, fmt.Sprintf("%s-%d", base, i), holder, natsstore.MinTTL)
		written[i] = time.Now()
	}
	outs := make([]error, len(grants))
	var wg sync.WaitGroup
	for i, g := range grants {
		wg.Go(func() {
			// The server shares this host's clock: the lease's TTL ran out
			// there before this wait ends, which waits for time itself.
			time.Sleep(time.Until(written[i].Add(natsstore.MinTTL + time.Duration(i)*time.Second/time.Duration(len(grants)))))
			rs, err := s.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
			if err == nil && rs[0].Renewed {
				err = fmt.Errorf("renewed: %+v", rs[0].Grant)
			}
			outs[i] = err
		})
	}
	wg.Wait()
	unknown := 0
	for i, err := range outs {
		if err != nil {
			require.ErrorIs(t, err, store.ErrUnavailable, "lease %q: a renewal stored after its TTL ran out", grants[i].Name)
			unknown++
		}
	}
	require.Positive(t, unknown, "no renewal found its key still there after the TTL ran out: the server now expires keys on time, and this test needs another way to store a renewal late")
}
