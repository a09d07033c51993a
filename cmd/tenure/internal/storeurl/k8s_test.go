package storeurl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestParseKubernetes(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]struct {
		display string
		backend *storeurl.Kubernetes
	}{
		"k8s://":     {"k8s://", &storeurl.Kubernetes{}},
		"k8s://jobs": {"k8s://jobs", &storeurl.Kubernetes{Namespace: "jobs"}},
		"K8S://jobs?kubeconfig=/etc/kc&context=prod&tenure_prefix=billing": {"k8s://jobs?kubeconfig=/etc/kc&context=prod&tenure_prefix=billing",
			&storeurl.Kubernetes{Namespace: "jobs", Kubeconfig: "/etc/kc", Context: "prod", Prefix: "billing"}},
	} {
		got, err := storeurl.Parse(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want.backend, got.Backend, raw)
		require.Equal(t, want.display, got.Display, raw)
	}
	for raw, msg := range map[string]string{
		"k8s://Jobs":                     "not a Kubernetes namespace name",
		"k8s://jobs/leases":              "has a path",
		"k8s://jobs:443":                 "has a port",
		"k8s://alice:pw@jobs":            "takes them from the kubeconfig",
		"k8s://jobs?token=x":             `unknown parameter "token"`,
		"k8s://jobs?context=a&context=b": "gives context 2 times",
	} {
		_, err := storeurl.Parse(raw)
		require.ErrorIs(t, err, store.ErrInvalid, raw)
		require.ErrorContains(t, err, msg, raw)
		require.NotContains(t, err.Error(), "pw", raw)
	}
}
