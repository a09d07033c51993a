package storeurl

import (
	"net/url"
	"regexp"

	"github.com/tenure-dev/tenure/store"
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

// parseKubernetes reads k8s://NAMESPACE?PARAMS: the Lease objects of a
// namespace, reached as kubectl reaches them.
func parseKubernetes(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, err, "storeurl: store URL is not a URL (%v); write it as %s", err, k8sForm)
	}
	t := Target{Kind: Kubernetes, Display: "k8s://" + u.Host}
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
	t.Namespace = u.Host
	for key, vals := range u.Query() {
		if len(vals) != 1 {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s gives %s %d times", t.Display, key, len(vals))
		}
		switch v := vals[0]; key {
		case ParamKubeconfig:
			t.Kubeconfig = v
		case ParamContext:
			t.KubeContext = v
		case ParamPrefix:
			t.Prefix = v
		default:
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: unknown parameter %q; a k8s:// URL takes %s, %s and %s", t.Display, key, ParamKubeconfig, ParamContext, ParamPrefix)
		}
	}
	return t, nil
}
