package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
)

// EnvSlot is the environment variable run --slots sets for its command:
// the slot taken, from 0 (the lease is NAME#SLOT).
const EnvSlot = "TENURE_SLOT"

// checkSlots validates --slots: 0 (a plain lease) or 1 to
// [store.MaxSlots], and a name whose last slot's lease name is valid.
func (o *runOptions) checkSlots() error {
	if o.slots == 0 {
		return nil
	}
	if o.slots < 0 || o.slots > store.MaxSlots {
		return usagef("run", "--slots %d: a name has 1 to %d slots (leave --slots out for a plain lease)", o.slots, store.MaxSlots)
	}
	if err := store.ValidateName(tenure.SlotName(o.name, o.slots-1)); err != nil {
		return usagef("run", "--name with --slots %d: %s", o.slots, message(err))
	}
	return nil
}

// take acquires the lease, or with --wait waits for it: one of the
// slots of NAME with --slots.
func (o *runOptions) take(ctx context.Context, e *env, client *tenure.Client) (*tenure.Lease, error) {
	if o.slots > 0 {
		return o.takeSlot(ctx, e, client)
	}
	l, err := client.Acquire(ctx, o.name)
	var held *store.HeldError
	if o.wait && errors.As(err, &held) {
		e.errorf("%s; waiting for it", heldLine(o.name, held))
	}
	if o.wait && err != nil {
		octx, stopObserving := context.WithCancel(ctx)
		var observer sync.WaitGroup
		observer.Go(func() { o.reportHolders(octx, e, client, held) })
		l, err = client.Campaign(ctx, o.name)
		stopObserving()
		observer.Wait()
	}
	return l, err
}

// takeSlot takes the first free slot of NAME, or with --wait waits for
// whichever frees first.
func (o *runOptions) takeSlot(ctx context.Context, e *env, client *tenure.Client) (*tenure.Lease, error) {
	l, err := client.AcquireSlot(ctx, o.name, o.slots)
	var all *tenure.SlotsHeldError
	if o.wait && errors.As(err, &all) {
		e.errorf("%s; waiting for one", slotsHeldLine(o.name, all))
	}
	if o.wait && err != nil {
		l, err = client.CampaignSlot(ctx, o.name, o.slots)
	}
	return l, err
}

// slotTaken makes the rest of run speak of the slot's lease, NAME#SLOT:
// the command's TENURE_LEASE, its release and progress, the outcome.
func (o *runOptions) slotTaken(l *tenure.Lease) {
	k, ok := l.Slot()
	if o.slots == 0 || !ok {
		return
	}
	o.name = l.Name()
	o.out.Lease, o.out.Slot = l.Name(), &k
}

// slotEnv is the command's TENURE_SLOT, when it runs under a slot.
func (o *runOptions) slotEnv(l *tenure.Lease) []string {
	if k, ok := l.Slot(); ok && o.slots > 0 {
		return []string{EnvSlot + "=" + strconv.Itoa(k)}
	}
	return nil
}

// slotsHeld is run's exit when every slot is held elsewhere.
func (o *runOptions) slotsHeld(all *tenure.SlotsHeldError) error {
	first := all.Held[0]
	for _, h := range all.Held {
		if h.Remaining < first.Remaining {
			first = h
		}
	}
	o.out.heldElsewhere(endedHeld, first.Holder, first.Token, first.Remaining)
	code := ExitNotAcquired
	if o.heldExit.set {
		code = o.heldExit.code
	}
	return &exitError{code: code, err: fmt.Errorf("%s; not acquired (use --wait to wait for one)", slotsHeldLine(o.name, all))}
}

// slotsHeldLine names the holder of every slot of name.
func slotsHeldLine(name string, all *tenure.SlotsHeldError) string {
	hs := make([]string, len(all.Held))
	for k, h := range all.Held {
		hs[k] = fmt.Sprintf("#%d %s (token %d, %s)", k, h.Holder, h.Token, remaining(h.Remaining))
	}
	return fmt.Sprintf("all %d slots of %q are held by the store's clock: %s", len(all.Held), name, strings.Join(hs, ", "))
}

// slotsUsage is the usage of status's and serve's --slots.
const slotsUsage = "show the `N` slots of each NAME, the leases NAME#0 … NAME#N-1 (see run --slots)"

// slotNames expands each of names into the leases of its n slots, for
// cmd's --slots; n = 0 leaves names as they are.
func slotNames(cmd string, names []string, n int) ([]string, error) {
	switch {
	case n == 0:
		return names, nil
	case n < 0 || n > store.MaxSlots:
		return nil, usagef(cmd, "--slots %d: a name has 1 to %d slots", n, store.MaxSlots)
	case len(names) == 0:
		return nil, usagef(cmd, "--slots needs the NAME whose slots to show")
	}
	out := make([]string, 0, n*len(names))
	for _, name := range names {
		for k := range n {
			out = append(out, tenure.SlotName(name, k))
		}
	}
	return out, nil
}
