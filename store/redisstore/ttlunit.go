package redisstore

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.TTLUnit = (*Store)(nil)

// TTLUnit implements [store.TTLUnit]: Redis keeps key TTLs (PX) in whole
// milliseconds, and the store rounds a finer TTL up, to a grant longer
// than asked, so a client refuses such a TTL when it is made.
func (s *Store) TTLUnit() time.Duration { return time.Millisecond }
