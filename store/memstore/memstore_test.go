package memstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

type harness struct{}

func (harness) NewStore(tb testing.TB) store.Store {
	s := memstore.New(memstore.Config{})
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func (harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, Line: true, Faults: storetest.Faults{
		NoCut:     "a memstore lives in this process's memory: there is no connection to cut",
		NoRestart: "a memstore lives in this process's memory: a restart loses every lease and token, by design",
	}}
}

func TestConformance(t *testing.T) { storetest.Run(t, harness{}) }

func BenchmarkConformance(b *testing.B) { storetest.Benchmark(b, harness{}) }
