package k8sstore

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

var _ store.TTLUnit = (*Store)(nil)

// TTLUnit implements [store.TTLUnit]: the store keeps a tenure's TTL in
// whole milliseconds (its annotation), which followers judge expiry by;
// a finer TTL would be cut short there, so a client refuses it when it is
// made.
func (s *Store) TTLUnit() time.Duration { return time.Millisecond }
