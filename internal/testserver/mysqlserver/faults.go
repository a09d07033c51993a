package mysqlserver

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testserver"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/storetest"
)

// proxy; the machine's server is not restarted.
func (h MySQLHarness) Faults() storetest.Faults {
	return storetest.Faults{NoRestart: testserver.NoRestartShared, NewStore: func(tb testing.TB) (store.Store, storetest.Fault) {
		tb.Helper()
		dc := MySQLDriverConfig(tb, h.Account)
		p := testserver.Proxy(tb, dc.Addr)
		dc.Addr = p.Addr()
		s := h.storeOn(tb, MySQLOpen(tb, dc))
		return s, testserver.CutFault(p, nil, s)
	}}
}
