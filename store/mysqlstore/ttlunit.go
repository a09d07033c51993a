package mysqlstore

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.TTLUnit = (*Store)(nil)

// TTLUnit implements [store.TTLUnit]: MySQL keeps times in whole
// microseconds, and the store rounds a finer TTL up, to a lease longer
// than asked, so a client refuses such a TTL when it is made.
func (s *Store) TTLUnit() time.Duration { return time.Microsecond }
