package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"sigs.k8s.io/yaml"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/k8sstore"
)

// Kubernetes is a k8s:// URL: store/k8sstore, the Lease objects of a
// namespace.
type Kubernetes struct {
	// Namespace is the namespace of the Lease objects, from the URL's
	// host; empty for the kubeconfig context's, or the pod's.
	Namespace string
	// Kubeconfig is the kubeconfig file, from the kubeconfig parameter;
	// empty for kubectl's default.
	Kubeconfig string
	// Context is the kubeconfig context, from the context parameter;
	// empty for its current one.
	Context string
	// Prefix is the prefix of the Lease objects' names, from the
	// tenure_prefix parameter; empty for the default.
	Prefix string
}

// Name is "Kubernetes".
func (*Kubernetes) Name() string { return "Kubernetes" }

// Form is how a k8s:// URL is written.
func (*Kubernetes) Form() string { return k8sForm }

// Traits of Kubernetes: no schema, only grants.
func (*Kubernetes) Traits() Traits { return Traits{GrantsAlone: true} }

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

// parseKubernetes reads k8s://NAMESPACE?PARAMS: the Lease objects of a
// namespace, reached as kubectl reaches them.
func parseKubernetes(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL is not a URL (%v); write it as %s", err, k8sForm)
	}
	k := &Kubernetes{}
	t := Target{Backend: k, Display: "k8s://" + u.Host}
	if u.RawQuery != "" {
		t.Display += "?" + u.RawQuery
	}
	switch {
	case u.User != nil:
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has credentials; a k8s:// URL takes them from the kubeconfig: write it as %s", t.Display, k8sForm)
	case u.Path != "" && u.Path != "/":
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a path (%s); name the namespace as the host: %s", t.Display, u.Path, k8sForm)
	case u.Port() != "":
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s has a port; the API server's address comes from the kubeconfig: write it as %s", t.Display, k8sForm)
	case u.Host != "" && !namespacePattern.MatchString(u.Host):
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: namespace %q is not a Kubernetes namespace name (lowercase letters, digits and '-', at most 63)", t.Display, u.Host)
	}
	k.Namespace = u.Host
	for key, vals := range u.Query() {
		if len(vals) != 1 {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s gives %s %d times", t.Display, key, len(vals))
		}
		switch v := vals[0]; key {
		case ParamKubeconfig:
			k.Kubeconfig = v
		case ParamContext:
			k.Context = v
		case ParamPrefix:
			k.Prefix = v
		default:
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: unknown parameter %q; a k8s:// URL takes %s, %s and %s", t.Display, key, ParamKubeconfig, ParamContext, ParamPrefix)
		}
	}
	return t, nil
}

// config returns the store's configuration, refusing what the store
// refuses.
func (k *Kubernetes) config(t Target) (k8sstore.Config, error) {
	cfg := k8sstore.Config{Prefix: k.Prefix}
	if err := cfg.Validate(); err != nil {
		return k8sstore.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return cfg, nil
}

// client loads the kubeconfig as kubectl does and returns the
// namespace's Leases client and the namespace.
func (k *Kubernetes) client(t Target, timeout time.Duration) (k8sstore.Leases, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.Kubeconfig != "" {
		rules.ExplicitPath = k.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", Errorf(store.ErrInvalid, err, "storeurl: store URL %s: cannot load the kubeconfig (%v); name one with ?%s=PATH or $KUBECONFIG, or run in a pod with a service account", t.Display, err, ParamKubeconfig)
	}
	ns := k.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", Errorf(store.ErrInvalid, err, "storeurl: store URL %s names no namespace and the kubeconfig gives none (%v); write it as %s", t.Display, err, k8sForm)
		}
	}
	cfg.Timeout = timeout
	cfg.UserAgent = applicationName
	// client-go's default of 5 requests a second would throttle the
	// renewals of more than a few leases.
	cfg.QPS, cfg.Burst = 100, 200
	leases, err := k8sstore.NewLeases(cfg, ns)
	if err != nil {
		return nil, "", Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %v", t.Display, err)
	}
	return leases, ns, nil
}

// Open opens the Lease objects of the URL's namespace and asks the API
// server once, so that a wrong address, refused credentials or a missing
// namespace fail here.
func (k *Kubernetes) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	cfg, err := k.config(t)
	if err != nil {
		return nil, err
	}
	leases, ns, err := k.client(t, timeout)
	if err != nil {
		return nil, err
	}
	st, err := k8sstore.New(leases, cfg)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := st.List(pctx); err != nil {
		kind := store.ErrUnavailable
		if !errors.Is(err, store.ErrUnavailable) {
			kind = store.ErrInvalid
		}
		return nil, Errorf(kind, err, "storeurl: cannot reach the Lease objects of namespace %s through %s: %v", ns, t.Display, err)
	}
	return k8sConn{baseConn{t: t, st: st}, k}, nil
}

// GrantSQL returns, as YAML for kubectl apply, the Role a worker needs in
// the URL's namespace ([k8sstore.Role]), a RoleBinding of it to the
// service account account, and the cluster-wide admission policy that
// keeps the worker from rewriting tokens ([k8sstore.AdmissionPolicy]).
func (k *Kubernetes) GrantSQL(t Target, account string) (string, error) {
	ns := k.Namespace
	if ns == "" {
		return "", Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names no namespace; name it to print its grant: %s", t.Display, k8sForm)
	}
	if len(validation.IsDNS1123Label(account)) > 0 {
		return "", Errorf(store.ErrInvalid, nil, "storeurl: %q is not a service account name (lowercase letters, digits and '-', at most 63)", account)
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
			return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
		}
		out = append(append(out, "---\n"...), y...)
	}
	out = append(append(out, "---\n"...), k8sstore.AdmissionPolicy()...)
	return string(out), nil
}

// ReadGrantSQL prints what GrantSQL prints: the store has no read-only
// grant of its own.
func (k *Kubernetes) ReadGrantSQL(t Target, account string) (string, error) {
	return k.GrantSQL(t, account)
}

// MigrationSQL refuses: the Lease objects need only an existing namespace.
func (*Kubernetes) MigrationSQL(Target) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: the Kubernetes store keeps no schema: its Lease objects need only an existing namespace; tenure migrate --print --grant ACCOUNT prints the Role and RoleBinding a worker's service account needs, and the admission policy that guards the token")
}

type k8sConn struct {
	baseConn
	backend *Kubernetes
}

// Migrate says there is nothing to migrate.
func (c k8sConn) Migrate(context.Context) (string, error) {
	return fmt.Sprintf("the Kubernetes store %s keeps no schema: nothing to migrate (its Lease objects are named %s-…); tenure migrate --print --grant ACCOUNT prints the Role its workers need",
		c.t.Display, cmp.Or(c.backend.Prefix, k8sstore.DefaultPrefix)), nil
}

var (
	_ Backend = (*Kubernetes)(nil)
)
