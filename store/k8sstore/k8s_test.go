package k8sstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

func TestObjectName(t *testing.T) {
	t.Parallel()
	names := []string{
		"nightly-billing", "Nightly-Billing", "nightly billing", "nightly_billing",
		"ünïcode/lease", "---", "a", strings.Repeat("x", store.MaxNameLen), "日本語のリース",
	}
	seen := map[string]string{}
	for _, name := range names {
		obj := k8sstore.ObjectName(k8sstore.DefaultPrefix, name)
		require.Empty(t, validation.IsDNS1123Subdomain(obj), "object name %q of lease %q", obj, name)
		require.True(t, strings.HasPrefix(obj, k8sstore.DefaultPrefix+"-"), obj)
		other, dup := seen[obj]
		require.False(t, dup, "leases %q and %q share object name %q", name, other, obj)
		seen[obj] = name
	}
	require.Equal(t, "tenure-nightly-billing-", k8sstore.ObjectName("tenure", "nightly-billing")[:len("tenure-nightly-billing-")])
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"Upper", "-lead", "trail-", "has_underscore", strings.Repeat("p", 41)} {
		_, err := k8sstore.New(fakeLeases{}, k8sstore.Config{Prefix: prefix})
		require.ErrorIs(t, err, store.ErrInvalid, "prefix %q", prefix)
	}
	_, err := k8sstore.New(nil, k8sstore.Config{})
	require.ErrorIs(t, err, store.ErrInvalid)
	require.NoError(t, k8sstore.Config{Prefix: "jobs-2"}.Validate())
}

// fakeLeases stands for a client in tests that make no request.
type fakeLeases struct{ k8sstore.Leases }

func TestFollowerTimesExpiryFromItsOwnFirstSighting(t *testing.T) {
	t.Parallel()
	h := harness(t)
	a, leases, cfg := h.New(t)
	b, err := k8sstore.New(leases, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	name := testutil.UniqueName(t)
	ttl := time.Second

	g, err := a.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "a"), TTL: ttl})
	require.NoError(t, err)
	// Nobody renews: the tenure ends one TTL after its write by any clock
	// that saw the write. b has not seen it.
	time.Sleep(ttl)
	rec, err := a.Get(ctx, name)
	require.NoError(t, err)
	require.Equal(t, store.StateExpired, rec.State, "the store that wrote the tenure saw it a TTL ago")

	_, err = b.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "b"), TTL: ttl})
	var held *store.HeldError
	require.ErrorAs(t, err, &held, "a store that sees a tenure for the first time gives it a whole TTL")
	require.Greater(t, held.Remaining, ttl-200*time.Millisecond)
	require.Equal(t, g.Token, held.Token)

	time.Sleep(held.Remaining)
	g2, err := b.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "b"), TTL: ttl})
	require.NoError(t, err, "a TTL after b first saw it unchanged")
	require.Equal(t, g.Token+1, g2.Token)
}

func TestOldSightingCannotTakeOverARenewedLease(t *testing.T) {
	t.Parallel()
	h := harness(t)
	holder, leases, cfg := h.New(t)
	follower, err := k8sstore.New(leases, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = follower.Close() })
	ctx := t.Context()
	name := testutil.UniqueName(t)
	ttl := time.Second

	g, err := holder.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "holder"), TTL: ttl})
	require.NoError(t, err)
	_, err = follower.Get(ctx, name)
	require.NoError(t, err)
	// The follower is paused (it calls nothing) for longer than the TTL,
	// while the holder renews: what it saw last is now older than a TTL.
	seq := g.Seq
	for deadline := time.Now().Add(2 * ttl); time.Now().Before(deadline); time.Sleep(ttl / 4) {
		rs, err := holder.Renew(ctx, []store.RenewParams{{Name: name, Holder: g.Holder, Token: g.Token, Seq: seq, TTL: ttl}})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed)
		seq = rs[0].Grant.Seq
	}
	_, err = follower.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "follower"), TTL: ttl})
	var held *store.HeldError
	require.ErrorAs(t, err, &held, "the follower's old sighting is of a version the holder replaced")
	require.Equal(t, g.Holder, held.Holder)
	require.Equal(t, seq, held.Seq)
}

func TestSpecTimesAreNotTrusted(t *testing.T) {
	t.Parallel()
	h := harness(t)
	s, leases, cfg := h.New(t)
	ctx := t.Context()
	name := testutil.UniqueName(t)
	g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.NoError(t, err)

	// A holder whose wall clock is years behind writes renewTime from it,
	// as client-go's leader election does.
	patch := `{"spec":{"renewTime":"2001-01-01T00:00:00.000000Z","acquireTime":"2001-01-01T00:00:00.000000Z","leaseDurationSeconds":1}}`
	_, err = leases.Patch(ctx, k8sstore.ObjectName(cfg.Prefix, name), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)

	_, err = s.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "b"), TTL: time.Minute})
	var held *store.HeldError
	require.ErrorAs(t, err, &held, "spec times from a holder's clock decide nothing")
	require.Equal(t, g.Token, held.Token)
	require.Greater(t, held.Remaining, 50*time.Second)
}

func TestTokensGrowAcrossObjectDeletion(t *testing.T) {
	t.Parallel()
	h := harness(t)
	s, leases, cfg := h.New(t)
	ctx := t.Context()
	name := testutil.UniqueName(t)
	hd := testutil.Holder(t, "a")

	var last store.Token
	for range 5 {
		g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: hd, TTL: time.Minute})
		require.NoError(t, err)
		require.Greater(t, g.Token, last)
		last = g.Token
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: hd, Token: g.Token}))
	}
	require.NoError(t, leases.Delete(ctx, k8sstore.ObjectName(cfg.Prefix, name), metav1.DeleteOptions{}))
	_, err := s.Get(ctx, name)
	require.ErrorIs(t, err, store.ErrNotFound)

	g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: hd, TTL: time.Minute})
	require.NoError(t, err)
	require.Greater(t, g.Token, last, "a lease whose object was deleted starts above every token it had")
}

// countingLeases counts the requests a store makes.
type countingLeases struct {
	k8sstore.Leases
	gets, patches, updates atomic.Int64
}

func (c *countingLeases) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordv1.Lease, error) {
	c.gets.Add(1)
	return c.Leases.Get(ctx, name, opts)
}

func (c *countingLeases) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*coordv1.Lease, error) {
	c.patches.Add(1)
	return c.Leases.Patch(ctx, name, pt, data, opts, sub...)
}

func (c *countingLeases) Update(ctx context.Context, l *coordv1.Lease, opts metav1.UpdateOptions) (*coordv1.Lease, error) {
	c.updates.Add(1)
	return c.Leases.Update(ctx, l, opts)
}

func TestRenewalIsOneRequest(t *testing.T) {
	t.Parallel()
	h := harness(t)
	_, leases, cfg := h.New(t)
	counted := &countingLeases{Leases: leases}
	s, err := k8sstore.New(counted, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()

	var ps []store.RenewParams
	for i := range 10 {
		name := testutil.UniqueName(t) + "-" + string(rune('a'+i))
		g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "a"), TTL: time.Minute})
		require.NoError(t, err)
		ps = append(ps, store.RenewParams{Name: name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute})
	}
	gets := counted.gets.Load()
	rs, err := s.Renew(ctx, ps)
	require.NoError(t, err)
	for _, r := range rs {
		require.True(t, r.Renewed)
	}
	require.Equal(t, gets, counted.gets.Load(), "renewing tenures the store wrote reads nothing")
	require.Equal(t, int64(len(ps)), counted.patches.Load(), "one patch a lease")

	// A renewal by a clone whose seq the first renewal moved on is refused
	// after one read, and leaves the lease alone.
	rs, err = s.Renew(ctx, ps[:1])
	require.NoError(t, err)
	require.False(t, rs[0].Renewed)
	require.Equal(t, ps[0].Seq+1, rs[0].Grant.Seq)
	require.Equal(t, int64(len(ps)), counted.patches.Load(), "a refused renewal writes nothing")
}

func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	h := harness(t)
	_, _, cfg := h.New(t)
	worker := h.Leases(t, h.Server.Worker())
	s, err := k8sstore.New(worker, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	name := testutil.UniqueName(t)
	p := store.AcquireParams{Name: name, Holder: testutil.Holder(t, "w"), TTL: time.Minute}

	_, err = s.Acquire(ctx, p)
	require.Error(t, err, "a worker nothing was granted to")
	require.NotErrorIs(t, err, store.ErrUnavailable)
	require.ErrorContains(t, err, "k8sstore.Role")

	bindRole(t, h, kubeserver.WorkerUser)

	// The authorizer learns of the binding through its own watch.
	var g store.Grant
	require.Eventually(t, func() bool {
		g, err = s.Acquire(ctx, p)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "acquire with the Role bound: %v", err)
	rs, err := s.Renew(ctx, []store.RenewParams{{Name: name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: g.Holder, Token: g.Token}))

	err = worker.Delete(ctx, k8sstore.ObjectName(cfg.Prefix, name), metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "the Role grants no delete: %v", err)
	require.False(t, errors.Is(err, store.ErrUnavailable))
}

// bindRole grants user [k8sstore.Role] in namespace default, with a Role
// and RoleBinding of the test's own, until the test ends. The authorizer
// learns of them through a watch of its own: a request right after may
// still be refused.
func bindRole(t *testing.T, h kubeserver.Harness, user string) {
	t.Helper()
	ctx := t.Context()
	rbac := h.RBAC(t)
	role := k8sstore.Role("default")
	role.Name = "tenure-" + strings.ToLower(strings.ReplaceAll(testutil.UniqueName(t), "_", "-"))
	_, err := rbac.Roles("default").Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: "rbac.authorization.k8s.io", Name: user}},
	}
	_, err = rbac.RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = rbac.RoleBindings("default").Delete(ctx, role.Name, metav1.DeleteOptions{})
		_ = rbac.Roles("default").Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
}
