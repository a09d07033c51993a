package kubeserver

import (
	"strings"
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// Faults implements [storetest.Capabilities.Faults]: a store on a
// kube-apiserver of its own (over an etcd of its own, which a restart of
// the apiserver leaves running, as a control plane's storage outlives an
// apiserver's restart), through a proxy.
func (Harness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		srv := Own(tb)
		p := testserver.Proxy(tb, strings.TrimPrefix(srv.Host, "https://"))
		proxied := *srv
		proxied.Host = "https://" + p.Addr()
		s, _, _ := Harness{Server: &proxied}.New(tb)
		return s, testserver.CutFault(p, srv.Process, s)
	}}
}
