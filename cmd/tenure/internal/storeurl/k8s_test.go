package storeurl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

func TestParseKubernetes(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]storeurl.Target{
		"k8s://":     {Kind: storeurl.Kubernetes, Display: "k8s://"},
		"k8s://jobs": {Kind: storeurl.Kubernetes, Display: "k8s://jobs"},
		"K8S://jobs?kubeconfig=/etc/kc&context=prod&tenure_prefix=billing": {Kind: storeurl.Kubernetes,
			Display: "k8s://jobs?kubeconfig=/etc/kc&context=prod&tenure_prefix=billing", Prefix: "billing"},
	} {
		got, err := storeurl.Parse(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want.Kind, got.Kind, raw)
		require.Equal(t, want.Display, got.Display, raw)
		require.Equal(t, want.Prefix, got.Prefix, raw)
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
