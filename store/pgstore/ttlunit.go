package pgstore

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.TTLUnit = (*Store)(nil)

// TTLUnit implements [store.TTLUnit]: PostgreSQL keeps intervals in whole
// microseconds and the store passes a TTL in them, cutting a finer one
// short; a client refuses such a TTL when it is made, so that the lease
// the store keeps is the one asked for.
func (s *Store) TTLUnit() time.Duration { return time.Microsecond }
