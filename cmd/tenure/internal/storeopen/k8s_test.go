package storeopen_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeopen"
	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/internal/testserver/kubeserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

func TestKubernetesGrant(t *testing.T) {
	t.Parallel()
	tg, err := storeurl.Parse("k8s://jobs")
	require.NoError(t, err)
	out, err := storeopen.GrantSQL(tg, "billing-worker")
	require.NoError(t, err)
	docs := splitYAML(out)
	require.Len(t, docs, 4)
	var role rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &role))
	require.Equal(t, *k8sstore.Role("jobs"), role)
	var binding rbacv1.RoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[1]), &binding))
	require.Equal(t, role.Name, binding.RoleRef.Name)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "billing-worker", Namespace: "jobs"}}, binding.Subjects)
	require.True(t, strings.HasSuffix(out, "---\n"+k8sstore.AdmissionPolicy()),
		"then the admission policy and its binding, as store/k8sstore/policy.yaml has them")
	var policy admissionv1.ValidatingAdmissionPolicy
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &policy))
	require.Equal(t, k8sstore.AdmissionPolicyName, policy.Name)
	var policyBinding admissionv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[3]), &policyBinding))
	require.Equal(t, policy.Name, policyBinding.Spec.PolicyName)

	_, err = storeopen.GrantSQL(tg, "Not An Account")
	require.ErrorIs(t, err, store.ErrInvalid)
	tg, err = storeurl.Parse("k8s://")
	require.NoError(t, err)
	_, err = storeopen.GrantSQL(tg, "worker")
	require.ErrorIs(t, err, store.ErrInvalid, "no namespace to grant in")
	_, err = storeopen.MigrationSQL(tg)
	require.ErrorIs(t, err, store.ErrInvalid, "no schema")
	require.ErrorContains(t, err, "--print --grant ACCOUNT")
}

func splitYAML(s string) []string {
	var docs []string
	for _, d := range strings.Split(s, "---\n") {
		if d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func TestOpenKubernetes(t *testing.T) {
	t.Parallel()
	srv := kubeserver.Own(t)
	admin := srv.Kubeconfig(t, srv.Admin())
	ctx := t.Context()

	tg, err := storeurl.Parse("k8s://?kubeconfig=" + admin + "&tenure_prefix=cli")
	require.NoError(t, err)
	o, err := storeopen.Open(ctx, tg, storeopen.Options{})
	require.NoError(t, err, "the context's namespace")
	g, err := o.Store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "cli"), TTL: 2 * time.Second})
	require.NoError(t, err)
	require.Positive(t, g.Token)
	require.NoError(t, o.Close())

	for name, tc := range map[string]struct {
		raw  string
		kind error
		want string
	}{
		"Worker":         {raw: "k8s://default?kubeconfig=" + srv.Kubeconfig(t, srv.Worker()), kind: store.ErrInvalid, want: "k8sstore.Role"},
		"NoKubeconfig":   {raw: "k8s://default?kubeconfig=" + filepath.Join(t.TempDir(), "none"), kind: store.ErrInvalid, want: "cannot load the kubeconfig"},
		"UnknownContext": {raw: "k8s://default?context=nope&kubeconfig=" + admin, kind: store.ErrInvalid, want: "cannot load the kubeconfig"},
	} {
		tg, err := storeurl.Parse(tc.raw)
		require.NoError(t, err, name)
		_, err = storeopen.Open(ctx, tg, storeopen.Options{})
		require.ErrorIs(t, err, tc.kind, name)
		require.ErrorContains(t, err, tc.want, name)
	}

	srv.Pause()
	t.Cleanup(srv.Resume)
	tg, err = storeurl.Parse("k8s://default?kubeconfig=" + admin)
	require.NoError(t, err)
	_, err = storeopen.Open(ctx, tg, storeopen.Options{ConnectTimeout: time.Second})
	require.ErrorIs(t, err, store.ErrUnavailable, "a server that does not answer")
}
