package storekit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// LeaseRecord is how an in-memory store reports one of its leases, named
// name, as a [store.Record] at its now.
type LeaseRecord[L any] func(l L, name string, now time.Time) store.Record

// Lookup is [store.Store.Get] over an in-memory store's map of leases: the
// record of name at now, or an error matching [store.ErrNotFound] prefixed
// with the backend's package name pkg. The caller holds the map's lock.
func Lookup[L any](pkg string, leases map[string]L, name string, now time.Time, record LeaseRecord[L]) (store.Record, error) {
	l, known := leases[name]
	if !known {
		return store.Record{}, fmt.Errorf("%s: lease %q: %w", pkg, name, store.ErrNotFound)
	}
	return record(l, name, now), nil
}

// Records is [store.Lister.List] over an in-memory store's map of leases:
// every lease's record at now, sorted by name. The caller holds the map's
// lock.
func Records[L any](leases map[string]L, now time.Time, record LeaseRecord[L]) []store.Record {
	records := make([]store.Record, 0, len(leases))
	for name, l := range leases {
		records = append(records, record(l, name, now))
	}
	slices.SortFunc(records, func(a, b store.Record) int { return strings.Compare(a.Name, b.Name) })
	return records
}
