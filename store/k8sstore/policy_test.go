package k8sstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// applyAdmissionPolicy creates the objects of [k8sstore.AdmissionPolicy]
// on h's server, as kubectl apply -f would, and deletes them when the test
// ends.
func applyAdmissionPolicy(t *testing.T, h kubeserver.Harness) {
	t.Helper()
	ctx := t.Context()
	c, err := admissionclient.NewForConfig(h.Server.Admin())
	require.NoError(t, err)
	docs := strings.Split(k8sstore.AdmissionPolicy(), "\n---\n")
	require.Len(t, docs, 2, "policy.yaml holds the policy and its binding")
	var policy admissionv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &policy))
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &binding))
	require.Equal(t, "ValidatingAdmissionPolicy", policy.Kind)
	require.Equal(t, "ValidatingAdmissionPolicyBinding", binding.Kind)
	require.Equal(t, k8sstore.AdmissionPolicyName, policy.Name)

	_, err = c.ValidatingAdmissionPolicies().Create(ctx, &policy, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.ValidatingAdmissionPolicies().Delete(context.WithoutCancel(ctx), policy.Name, metav1.DeleteOptions{})
	})
	_, err = c.ValidatingAdmissionPolicyBindings().Create(ctx, &binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.ValidatingAdmissionPolicyBindings().Delete(context.WithoutCancel(ctx), binding.Name, metav1.DeleteOptions{})
	})
}

// setToken is a merge patch of a Lease object's token annotation; a nil
// token removes it.
func setToken(token any) []byte {
	return fmt.Appendf(nil, `{"metadata":{"annotations":{"tenure.dev/token":%s}}}`, mustJSON(token))
}

func mustJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	}
	panic(fmt.Sprintf("mustJSON: %T", v))
}

// TestAdmissionPolicyKeepsTheToken: a worker with the Role it needs can
// rewrite the token annotation of a lease's object, which would make a
// later tenure reuse a token. With [k8sstore.AdmissionPolicy] applied, the
// API server refuses each such rewrite (from the worker and from an
// administrator alike), while the store's own acquisitions, renewals,
// releases and takeovers, as the worker, pass.
func TestAdmissionPolicyKeepsTheToken(t *testing.T) {
	t.Parallel()
	h := harness(t)
	_, admin, cfg := h.New(t)
	// A worker of its own, impersonated by the administrator, which the
	// Role is bound to: TestLeastPrivilege needs kubeserver.WorkerUser
	// bound to nothing.
	user := "tenure-policy-worker"
	bindRole(t, h, user)
	cfgAs := rest.CopyConfig(h.Server.Admin())
	cfgAs.Impersonate = rest.ImpersonationConfig{UserName: user}
	worker := h.Leases(t, cfgAs)
	s, err := k8sstore.New(worker, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	a := testutil.Holder(t, "a")
	ttl := time.Second

	// Without the policy the Role lets the worker lower the token.
	name := testutil.UniqueName(t)
	var g store.Grant
	require.Eventually(t, func() bool {
		g, err = s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: time.Minute})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "acquire with the Role bound: %v", err)
	obj := k8sstore.ObjectName(cfg.Prefix, name)
	lower := setToken(strconv.FormatInt(int64(g.Token)-1, 10))
	// The API server drops a policy deleted by an earlier run of this test
	// through its watch too: a dry run shows when it has.
	require.Eventually(t, func() bool {
		_, err = worker.Patch(ctx, obj, types.MergePatchType, lower, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "no policy is in force: %v", err)
	_, err = worker.Patch(ctx, obj, types.MergePatchType, lower, metav1.PatchOptions{})
	require.NoError(t, err, "the Role alone lets a worker lower the token")

	applyAdmissionPolicy(t, h)
	// The API server takes the policy up through a watch of its own; a
	// dry run of a refused write shows when it is in force.
	current := tokenOf(t, admin, obj)
	require.Eventually(t, func() bool {
		_, err = worker.Patch(ctx, obj, types.MergePatchType, setToken(nil), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err)
	}, 30*time.Second, 50*time.Millisecond, "the policy is in force: %v", err)
	require.Equal(t, current, tokenOf(t, admin, obj))

	// The store's own writes, as the worker, pass.
	name = testutil.UniqueName(t)
	obj = k8sstore.ObjectName(cfg.Prefix, name)
	g, err = s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: ttl})
	require.NoError(t, err, "create")
	rs, err := s.Renew(ctx, []store.RenewParams{{Name: name, Holder: a, Token: g.Token, Seq: g.Seq, TTL: ttl}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: a, Token: g.Token}))
	g2, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: ttl})
	require.NoError(t, err, "the same holder again after its release")
	require.Equal(t, g.Token+1, g2.Token)
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: a, Token: g2.Token}))
	b := testutil.Holder(t, "b")
	g3, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: b, TTL: ttl})
	require.NoError(t, err, "another holder after a release")
	require.Equal(t, g2.Token+1, g3.Token)
	_, err = s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: ttl})
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	time.Sleep(held.Remaining) // nobody renews: the tenure expires
	g4, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: ttl})
	require.NoError(t, err, "a takeover after the expiry")
	require.Equal(t, g3.Token+1, g4.Token)

	// Every rewrite that could make a later tenure reuse a token is
	// refused, and changes nothing.
	tok := strconv.FormatInt(int64(g4.Token), 10)
	forged := map[string][]byte{
		"lowered":                    setToken(strconv.FormatInt(int64(g4.Token)-1, 10)),
		"removed":                    setToken(nil),
		"not a number":               setToken("x" + tok),
		"raised by two":              setToken(strconv.FormatInt(int64(g4.Token)+2, 10)),
		"annotations off":            []byte(`{"metadata":{"annotations":null}}`),
		"another holder, same token": []byte(`{"metadata":{"annotations":{"tenure.dev/holder-instance":"forged"}}}`),
	}
	before := tokenOf(t, admin, obj)
	for what, patch := range forged {
		for who, leases := range map[string]coordinationv1.LeaseInterface{"worker": worker, "administrator": admin} {
			_, err := leases.Patch(ctx, obj, types.MergePatchType, patch, metav1.PatchOptions{})
			require.True(t, apierrors.IsInvalid(err), "%s by the %s: %v", what, who, err)
			require.ErrorContains(t, err, "tenure.dev/token", "%s by the %s", what, who)
		}
	}
	after, err := admin.Get(ctx, obj, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, before, after.Annotations["tenure.dev/token"])
	require.Equal(t, a.Instance, after.Annotations["tenure.dev/holder-instance"])

	// A released tenure held again by the same holder needs a new token.
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: a, Token: g4.Token}))
	_, err = worker.Patch(ctx, obj, types.MergePatchType, []byte(`{"metadata":{"annotations":{"tenure.dev/state":"held"}}}`), metav1.PatchOptions{})
	require.True(t, apierrors.IsInvalid(err), "a released tenure held again with its token: %v", err)
	g5, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: a, TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, g4.Token+1, g5.Token)
}

// tokenOf reads the token annotation of Lease object obj.
func tokenOf(t *testing.T, leases coordinationv1.LeaseInterface, obj string) string {
	t.Helper()
	l, err := leases.Get(t.Context(), obj, metav1.GetOptions{})
	require.NoError(t, err)
	return l.Annotations["tenure.dev/token"]
}
