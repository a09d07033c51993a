package consulstore

import (
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// maxBusy bounds the leases [busy] remembers.
const maxBusy = 4096

// busy is what a store last learned of leases that could not be acquired:
// per lease name, until when, by the local clock, the store expects it
// held, or kept for the follower a release named. It decides one thing
// only: whether an acquisition creates its session while it reads the
// lease (see [Store.speculate]). A lease is never refused from here:
// every acquisition reads the lease and decides on what it read (promise
// P8).
//
// A lease seen held (refused, or heard acquired) is remembered for twice
// the remaining time: Consul invalidates a session that is not renewed
// between its TTL and twice its TTL, and a holder that renews says
// nothing, so a follower coming back at the expiry it was told mostly
// finds the lease held still. A release that names the head of the line,
// made or heard, keeps the lease for that follower for [store.Handoff],
// as the line's followers do. A lease is forgotten when this store grants
// it, and when a [Store.Listen] call hears it released with nobody
// waiting or unlocked without a release (the head's record watch), or
// hears the empty notice (it may have missed anything). A store whose
// Listen does not run learns of a release from the time passing only: its
// acquisitions until then take three round trips, one after the other.
type busy struct {
	mu    sync.Mutex
	until map[string]busyLease
}

// busyLease is a lease expected held until until, or kept for next.
type busyLease struct {
	until time.Time
	next  store.Holder
}

func newBusy() *busy { return &busy{until: make(map[string]busyLease)} }

// held records that lease name cannot be acquired for d from now, but by
// next, when it is not the zero holder.
func (b *busy) held(name string, d time.Duration, next store.Holder) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.until[name]; !ok && len(b.until) >= maxBusy {
		for n, l := range b.until {
			if !l.until.After(now) {
				delete(b.until, n)
			}
		}
		if len(b.until) >= maxBusy {
			return
		}
	}
	b.until[name] = busyLease{until: now.Add(d), next: next}
}

// free forgets lease name; the empty name forgets every lease.
func (b *busy) free(name string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if name == "" {
		clear(b.until)
		return
	}
	delete(b.until, name)
}

// is reports whether lease name is expected held, or kept for a follower
// other than holder.
func (b *busy) is(name string, holder store.Holder) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.until[name]
	if ok && !l.until.After(time.Now()) {
		delete(b.until, name)
		return false
	}
	return ok && l.next != holder
}

// heard updates what the store expects of the lease of n, which Listen
// heard.
func (s *Store) heard(n store.Notice) {
	switch {
	case n.Kind == store.NoticeAcquired:
		s.busy.held(n.Name, 2*n.Remaining, store.Holder{})
	case n.Kind == store.NoticeReleased && n.Next != (store.Holder{}):
		s.busy.held(n.Name, store.Handoff, n.Next)
	default:
		s.busy.free(n.Name)
	}
}

// speculate reports whether an acquisition of lease name by holder should
// create its session while it reads the lease, so that a lease found free
// costs two round trips' time instead of three. It should unless the
// store expects a refusal: the lease is locked by the store's own write,
// or [busy] expects it held or kept for another follower. A wrong guess
// costs one way or the other: a refused acquisition that speculated waits
// for the creation (a Raft write, slower than the read) and destroys the
// session in the background; a granted one that did not creates its
// session after the read, as every acquisition did before.
func (s *Store) speculate(name string, holder store.Holder) bool {
	return !s.memo.holds(name) && !s.busy.is(name, holder)
}
