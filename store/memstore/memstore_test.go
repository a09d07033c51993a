package memstore_test

import (
	"testing"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/memstore/memstoretest"
	"github.com/tenure-dev/tenure/store/storetest"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

func TestConformance(t *testing.T) { storetest.Run(t, memstoretest.Harness{}) }

func BenchmarkConformance(b *testing.B) { storetest.Benchmark(b, memstoretest.Harness{}) }
