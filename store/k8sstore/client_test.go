package k8sstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// restHarness gives the conformance suite stores over [k8sstore.NewLeases]
// (what the CLI uses) instead of the typed clientset kubeserver's
// harness uses.
type restHarness struct{ kubeserver.Harness }

func (h restHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	leases, err := k8sstore.NewLeases(h.Server.Admin(), "default")
	require.NoError(tb, err)
	cfg := k8sstore.Config{Prefix: "r" + testutil.RandomHex(8)}
	s, err := k8sstore.New(leases, cfg)
	require.NoError(tb, err)
	admin := h.Leases(tb, h.Server.Admin())
	tb.Cleanup(func() {
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := admin.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: k8sstore.LabelPrefix + "=" + cfg.Prefix})
		if err != nil {
			tb.Errorf("delete the Lease objects of prefix %s: %v", cfg.Prefix, err)
		}
	})
	return s
}

func TestConformanceREST(t *testing.T) {
	t.Parallel()
	storetest.Run(t, restHarness{harness(t)})
}

func TestNewLeasesRefuses(t *testing.T) {
	t.Parallel()
	_, err := k8sstore.NewLeases(nil, "default")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = k8sstore.NewLeases(&rest.Config{Host: "https://127.0.0.1:6443"}, "")
	require.ErrorIs(t, err, store.ErrInvalid)
	_, err = k8sstore.NewLeases(&rest.Config{Host: "://no"}, "default")
	require.ErrorIs(t, err, store.ErrInvalid)
}
