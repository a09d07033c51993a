package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Slots: a semaphore of N holders over one name. Slot k of NAME is the
// lease named [SlotName](NAME, k), "NAME#k" (k from 0), a lease like any
// other: its own token sequence, renewal chain, fence, history and
// notifications. At most N tenures of NAME are held at once because there
// are N such leases; a store makes taking the first free one a single
// step when it implements [SlotAcquirer], and [AcquireSlot] tries them in
// order with [Store.Acquire] when it does not.
const (
	// SlotSeparator joins a name and a slot index in a slot's lease name.
	// A name may itself hold it: the index is what follows the last one.
	SlotSeparator = "#"
	// MaxSlots is the most slots one name may have.
	MaxSlots = 256
)

// SlotName returns the lease name of slot k of name: "name#k". It is an
// ordinary lease name: a plain lease of that name is the slot itself, so
// names of that form are best kept away from a name used with slots.
func SlotName(name string, k int) string {
	return name + SlotSeparator + strconv.Itoa(k)
}

// ParseSlotName splits a slot's lease name into the name and the slot
// index; ok is false when s is no slot's name (no separator followed by a
// decimal index without leading zeros).
func ParseSlotName(s string) (name string, k int, ok bool) {
	i := strings.LastIndex(s, SlotSeparator)
	if i <= 0 {
		return "", 0, false
	}
	digits := s[i+len(SlotSeparator):]
	if digits == "" || len(digits) > 3 || (len(digits) > 1 && digits[0] == '0') || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	k, _ = strconv.Atoi(digits)
	if k >= MaxSlots {
		return "", 0, false
	}
	return s[:i], k, true
}

// SlotAcquirer is implemented by stores that take the first free slot of
// a name in one atomic step (one statement, script or transaction). A
// store without it gets the same answer from [AcquireSlot] by trying the
// slots in order, one round trip each.
type SlotAcquirer interface {
	// AcquireSlot acquires, as [Store.Acquire] would, the lowest-numbered
	// slot of p.Name among 0 … p.Slots−1 that is free (absent, released
	// or expired by the store's clock), and returns its grant, named
	// SlotName(p.Name, k), and k. When every slot is held it changes
	// nothing and returns a [*SlotsHeldError] listing the holders. Params
	// are checked with [SlotParams.Validate].
	AcquireSlot(ctx context.Context, p SlotParams) (SlotGrant, error)
}

// SlotParams asks for one slot of a name.
type SlotParams struct {
	Name    string // the name, without a slot index
	Slots   int    // how many slots the name has, 1 … MaxSlots
	Holder  Holder
	TTL     time.Duration
	Payload string
}

// Validate reports whether p is well formed: a valid name whose last
// slot's lease name is valid too, 1 … [MaxSlots] slots, a valid holder,
// payload and TTL.
func (p SlotParams) Validate() error {
	if p.Slots < 1 || p.Slots > MaxSlots {
		return fmt.Errorf("%w: %d slots for %q; a name has 1 to %d slots", ErrInvalid, p.Slots, p.Name, MaxSlots)
	}
	if err := ValidateName(p.Name); err != nil {
		return err
	}
	return p.Acquire(p.Slots - 1).Validate()
}

// Acquire returns the [AcquireParams] of slot k.
func (p SlotParams) Acquire(k int) AcquireParams {
	return AcquireParams{Name: SlotName(p.Name, k), Holder: p.Holder, TTL: p.TTL, Payload: p.Payload}
}

// SlotGrant is a tenure of one slot: Grant.Name is SlotName(name, Slot).
type SlotGrant struct {
	Grant
	Slot int
}

// SlotsHeldError reports that every slot of a name is held. It matches
// [ErrHeld].
type SlotsHeldError struct {
	Name string
	// Held has one entry per slot, in slot order: who holds it and for
	// how long by the store's clock. A store may report a slot as held
	// with a zero Holder (kept for a follower in line, or being written by
	// a transaction the store could not see).
	Held []HeldError
}

// Error names the holders and the soonest expiry.
func (e *SlotsHeldError) Error() string {
	hs := make([]string, len(e.Held))
	for i, h := range e.Held {
		hs[i] = fmt.Sprintf("#%d %s (token %d)", i, h.Holder, h.Token)
	}
	return fmt.Sprintf("tenure: all %d slots of %q are held: %s; the first frees in %s at the latest",
		len(e.Held), e.Name, strings.Join(hs, ", "), e.Soonest().Round(time.Millisecond))
}

// Is matches [ErrHeld].
func (e *SlotsHeldError) Is(target error) bool { return target == ErrHeld }

// Soonest returns the shortest remaining time of the slots: the latest a
// slot frees by the store's clock unless it is renewed.
func (e *SlotsHeldError) Soonest() time.Duration {
	var d time.Duration
	for i, h := range e.Held {
		if i == 0 || h.Remaining < d {
			d = h.Remaining
		}
	}
	return d
}

// AcquireSlot takes the first free slot of p.Name on s: in one step when s
// is a [SlotAcquirer], else by trying slot 0, 1, … with [Store.Acquire]
// until one is granted (one round trip per slot tried). It returns the
// grant and slot, a [*SlotsHeldError] when every slot is held, or the
// first error that is not [ErrHeld] (the slots before it were held; the
// outcome of the failed attempt is unknown, as Acquire's would be).
func AcquireSlot(ctx context.Context, s Store, p SlotParams) (SlotGrant, error) {
	if err := p.Validate(); err != nil {
		return SlotGrant{}, err
	}
	if sa, ok := s.(SlotAcquirer); ok {
		return sa.AcquireSlot(ctx, p)
	}
	all := &SlotsHeldError{Name: p.Name, Held: make([]HeldError, p.Slots)}
	for k := range p.Slots {
		g, err := s.Acquire(ctx, p.Acquire(k))
		var held *HeldError
		switch {
		case err == nil:
			return SlotGrant{Grant: g, Slot: k}, nil
		case errors.As(err, &held):
			all.Held[k] = *held
		default:
			return SlotGrant{}, err
		}
	}
	return SlotGrant{}, all
}
