package storeopen

import (
	"context"
	"errors"
	"time"

	"sigs.k8s.io/yaml"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// k8sConfig returns the configuration of the Kubernetes store t names,
// refusing what the store refuses.
func k8sConfig(t storeurl.Target) (k8sstore.Config, error) {
	cfg := k8sstore.Config{Prefix: t.Prefix}
	if err := cfg.Validate(); err != nil {
		return k8sstore.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return cfg, nil
}

// kubeClient loads the kubeconfig as kubectl does and returns the
// namespace's Leases client and the namespace.
func kubeClient(t storeurl.Target, timeout time.Duration) (coordinationv1.LeaseInterface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if t.Kubeconfig != "" {
		rules.ExplicitPath = t.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.KubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: cannot load the kubeconfig (%v); name one with ?%s=PATH or $KUBECONFIG, or run in a pod with a service account", t.Display, err, storeurl.ParamKubeconfig)
	}
	ns := t.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s names no namespace and the kubeconfig gives none (%v); write it as %s", t.Display, err, storeurl.Kubernetes.Form())
		}
	}
	cfg.Timeout = timeout
	cfg.UserAgent = applicationName
	// client-go's default of 5 requests a second would throttle the
	// renewals of more than a few leases.
	cfg.QPS, cfg.Burst = 100, 200
	c, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return c.Leases(ns), ns, nil
}

// openKubernetes opens the Lease objects of the URL's namespace and asks
// the API server once, so that a wrong address, refused credentials or a
// missing namespace fail here.
func openKubernetes(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	cfg, err := k8sConfig(t)
	if err != nil {
		return nil, err
	}
	leases, ns, err := kubeClient(t, timeout)
	if err != nil {
		return nil, err
	}
	st, err := k8sstore.New(leases, cfg)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := st.List(pctx); err != nil {
		kind := store.ErrUnavailable
		if !errors.Is(err, store.ErrUnavailable) {
			kind = store.ErrInvalid
		}
		return nil, storeurl.Errorf(kind, err, "storeurl: cannot reach the Lease objects of namespace %s through %s: %v", ns, t.Display, err)
	}
	return &Opened{Target: t, Store: st}, nil
}

// kubernetesGrant returns, as YAML for kubectl apply, the Role a worker
// needs in the URL's namespace ([k8sstore.Role]), a RoleBinding of it to
// the service account account, and the cluster-wide admission policy that
// keeps the worker from rewriting tokens ([k8sstore.AdmissionPolicy]).
func kubernetesGrant(t storeurl.Target, account string) (string, error) {
	ns := t.Namespace
	if ns == "" {
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names no namespace; name it to print its grant: %s", t.Display, storeurl.Kubernetes.Form())
	}
	if len(validation.IsDNS1123Label(account)) > 0 {
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: %q is not a service account name (lowercase letters, digits and '-', at most 63)", account)
	}
	role := k8sstore.Role(ns)
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: account, Namespace: ns}},
	}
	var out []byte
	for _, obj := range []any{role, binding} {
		y, err := yaml.Marshal(obj)
		if err != nil {
			return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
		}
		out = append(append(out, "---\n"...), y...)
	}
	out = append(append(out, "---\n"...), k8sstore.AdmissionPolicy()...)
	return string(out), nil
}
