// Package memstoretest is memstore's conformance harness, shared by
// memstore's tests and by the check that docs/STORES.md states what every
// backend's harness declares. Like package storetest it is for tests
// only.
package memstoretest

import (
	"testing"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// Harness gives the conformance suite a fresh memstore per call.
type Harness struct{}

// NewStore implements [storetest.Harness].
func (Harness) NewStore(tb testing.TB) store.Store {
	s := memstore.New(memstore.Config{})
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Capabilities implements [storetest.Harness]: memstore notifies, keeps
// followers in line and expires exactly; it has no server to cut off or
// restart.
func (Harness) Capabilities() storetest.Capabilities {
	return storetest.Capabilities{Notify: true, Line: true, Faults: storetest.Faults{
		NoCut:     "a memstore lives in this process's memory: there is no connection to cut",
		NoRestart: "a memstore lives in this process's memory: a restart loses every lease and token, by design",
	}}
}
