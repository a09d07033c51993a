package storeurl

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"time"

	"sigs.k8s.io/yaml"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// Kubernetes is the kind of a k8s:// URL: store/k8sstore.
const Kubernetes Kind = "k8s"

// Query parameters of a k8s:// URL.
const (
	// ParamKubeconfig names the kubeconfig file (default: $KUBECONFIG,
	// else ~/.kube/config, else the pod's service account).
	ParamKubeconfig = "kubeconfig"
	// ParamContext names the kubeconfig context (default: its current one).
	ParamContext = "context"
)

const k8sForm = "k8s://[NAMESPACE][?kubeconfig=PATH&context=NAME&tenure_prefix=PREFIX]"

// namespacePattern is what a namespace may be: a DNS label.
var namespacePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// k8sTarget is what a k8s:// URL names.
type k8sTarget struct {
	namespace  string // empty: the kubeconfig context's, or the pod's
	kubeconfig string
	context    string
}

// parseKubernetes reads k8s://NAMESPACE?PARAMS: the Lease objects of a
// namespace, reached as kubectl reaches them.
func parseKubernetes(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL is not a URL (%v); write it as %s", err, k8sForm)
	}
	t := Target{Kind: Kubernetes, Display: "k8s://" + u.Host}
	if u.RawQuery != "" {
		t.Display += "?" + u.RawQuery
	}
	switch {
	case u.User != nil:
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has credentials; a k8s:// URL takes them from the kubeconfig: write it as %s", t.Display, k8sForm)
	case u.Path != "" && u.Path != "/":
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); name the namespace as the host: %s", t.Display, u.Path, k8sForm)
	case u.Port() != "":
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s has a port; the API server's address comes from the kubeconfig: write it as %s", t.Display, k8sForm)
	case u.Host != "" && !namespacePattern.MatchString(u.Host):
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: namespace %q is not a Kubernetes namespace name (lowercase letters, digits and '-', at most 63)", t.Display, u.Host)
	}
	t.k8s.namespace = u.Host
	for key, vals := range u.Query() {
		if len(vals) != 1 {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s gives %s %d times", t.Display, key, len(vals))
		}
		switch v := vals[0]; key {
		case ParamKubeconfig:
			t.k8s.kubeconfig = v
		case ParamContext:
			t.k8s.context = v
		case ParamPrefix:
			t.K8s.Prefix = v
		default:
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: unknown parameter %q; a k8s:// URL takes %s, %s and %s", t.Display, key, ParamKubeconfig, ParamContext, ParamPrefix)
		}
	}
	if err := t.K8s.Validate(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return t, nil
}

// kubeClient loads the kubeconfig as kubectl does and returns the
// namespace's Leases client and the namespace.
func (t Target) kubeClient(timeout time.Duration) (coordinationv1.LeaseInterface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if t.k8s.kubeconfig != "" {
		rules.ExplicitPath = t.k8s.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.k8s.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", newError(store.ErrInvalid, err, "storeurl: store URL %s: cannot load the kubeconfig (%v); name one with ?%s=PATH or $KUBECONFIG, or run in a pod with a service account", t.Display, err, ParamKubeconfig)
	}
	ns := t.k8s.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", newError(store.ErrInvalid, err, "storeurl: store URL %s names no namespace and the kubeconfig gives none (%v); write it as %s", t.Display, err, k8sForm)
		}
	}
	cfg.Timeout = timeout
	cfg.UserAgent = applicationName
	// client-go's default of 5 requests a second would throttle the
	// renewals of more than a few leases.
	cfg.QPS, cfg.Burst = 100, 200
	c, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, "", newError(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return c.Leases(ns), ns, nil
}

// openKubernetes opens the Lease objects of the URL's namespace and asks
// the API server once, so that a wrong address, refused credentials or a
// missing namespace fail here.
func (t Target) openKubernetes(ctx context.Context, timeout time.Duration) (*Opened, error) {
	leases, ns, err := t.kubeClient(timeout)
	if err != nil {
		return nil, err
	}
	st, err := k8sstore.New(leases, t.K8s)
	if err != nil {
		return nil, newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := st.List(pctx); err != nil {
		kind := store.ErrUnavailable
		if !errors.Is(err, store.ErrUnavailable) {
			kind = store.ErrInvalid
		}
		return nil, newError(kind, err, "storeurl: cannot reach the Lease objects of namespace %s through %s: %v", ns, t.Display, err)
	}
	return &Opened{Target: t, Store: st}, nil
}

// kubernetesGrant returns, as YAML for kubectl apply, the Role a worker
// needs in the URL's namespace ([k8sstore.Role]) and a RoleBinding of it
// to the service account account.
func (t Target) kubernetesGrant(account string) (string, error) {
	ns := t.k8s.namespace
	if ns == "" {
		return "", newError(store.ErrInvalid, nil, "storeurl: store URL %s names no namespace; name it to print its grant: %s", t.Display, k8sForm)
	}
	if !namespacePattern.MatchString(account) {
		return "", newError(store.ErrInvalid, nil, "storeurl: %q is not a service account name (lowercase letters, digits and '-', at most 63)", account)
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
			return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
		}
		out = append(append(out, "---\n"...), y...)
	}
	return string(out), nil
}
