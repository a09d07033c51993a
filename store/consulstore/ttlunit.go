package consulstore

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.TTLUnit = (*Store)(nil)

// TTLUnit implements [store.TTLUnit]: the store keeps session TTLs and
// its records' TTLs in whole milliseconds and rounds a finer TTL up, to a
// grant longer than asked, so a client refuses such a TTL when it is made.
func (s *Store) TTLUnit() time.Duration { return time.Millisecond }
