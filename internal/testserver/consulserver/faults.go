package consulserver

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// through a proxy.
func (h ConsulHarness) Faults() storetest.Faults {
	return storetest.Faults{NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		agent, err := StartConsul(tb.Context(), ConsulConfig{Server: true})
		testutil.NeedServer(tb, "consul agent", err)
		tb.Cleanup(func() {
			if err := agent.Stop(); err != nil {
				tb.Errorf("testserver: stop consul %s: %v", agent.Node, err)
			}
		})
		p := testserver.Proxy(tb, agent.HTTPAddr)
		s := h.storeOn(tb, ConsulClient(tb, p.Addr()))
		return s, testserver.CutFault(p, agent, s)
	}}
}
