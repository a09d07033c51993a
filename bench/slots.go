package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// benchSlots is how many slots the slot measurement gives a name;
// benchSlots−1 of them are held throughout, so each acquisition takes the
// last: the most a caller pays short of finding all held.
const benchSlots = 3

// sloter is a participant that can take slots of a name (tenure only).
type sloter interface {
	// slotCycle takes a slot of name, of which all but one are held,
	// after an idle gap of hold, and gives it back; acquire is how long
	// the acquisition took.
	slotCycle(ctx context.Context, name string, hold time.Duration) (acquire time.Duration, err error)
}

var _ sloter = (*tenurePart)(nil)

// slotHeld holds the other slots of the names tenure participants measure
// slots on, for as long as their clients run (Run releases them).
var slotHeld sync.Map // name -> struct{}

func (p *tenurePart) slotCycle(ctx context.Context, name string, hold time.Duration) (time.Duration, error) {
	if _, held := slotHeld.LoadOrStore(name, struct{}{}); !held {
		for range benchSlots - 1 {
			if _, err := p.c.AcquireSlot(ctx, name, benchSlots); err != nil {
				return 0, fmt.Errorf("hold the other slots of %q: %w", name, err)
			}
		}
	}
	time.Sleep(hold)
	t0 := time.Now()
	l, err := p.c.AcquireSlot(ctx, name, benchSlots)
	d := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if k, _ := l.Slot(); k != benchSlots-1 {
		return 0, fmt.Errorf("took slot %d of %q; the others should be held", k, name)
	}
	return d, l.Release(ctx)
}

// AcquireSlot passes a slot acquisition on to the store, in one step
// where it has one ([store.AcquireSlot]), so that a client over a
// crashStore takes slots as it would over the store itself.
func (s *crashStore) AcquireSlot(ctx context.Context, p store.SlotParams) (store.SlotGrant, error) {
	if s.dead.Load() {
		return store.SlotGrant{}, errCrashed
	}
	s.calls.add(1)
	g, err := store.AcquireSlot(ctx, s.inner, p)
	if err == nil && !s.dead.Load() {
		s.mark(g.Name, time.Now())
	}
	return g, err
}

var _ store.SlotAcquirer = (*crashStore)(nil)

// slotsTable renders the slot acquisitions beside the plain ones.
func (r *report) slotsTable(b *strings.Builder) {
	var rows []string
	for _, s := range r.Subjects {
		res := s.Result
		if res.SlotAcquire == nil || res.Acquire == nil {
			continue
		}
		wf := r.floor(s.Store, "write paced")
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %.2f× |\n", s.Name, s.Store, fmtDur(s.TTL),
			ratio(res.Acquire.P50, wf), ratio(res.SlotAcquire.P50, wf), float64(res.SlotAcquire.P50)/float64(max(1, res.Acquire.P50))))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Slots\n\nAcquiring one of %d slots of a name (`Client.AcquireSlot`) while the other %d are held, so the last is taken, beside acquiring a lease nobody holds (the latency table's acquire), p50, after the same idle gap; (n×) is the ratio to the store's paced write floor, the last column slot over lease. PostgreSQL, SQLite, Redis and etcd take a slot in one step; Consul tries the slots in turn.\n\n", benchSlots, benchSlots-1)
	b.WriteString("| subject | store | TTL | acquire a lease | acquire a slot | slot / lease |\n|---|---|---|---|---|---|\n")
	for _, row := range rows {
		b.WriteString(row)
	}
}

// tenureSlotName is the name a subject's participant measures slots on.
func tenureSlotName(name string) string { return name + "-slots" }
