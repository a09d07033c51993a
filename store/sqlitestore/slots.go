package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/store"
)

var _ store.SlotAcquirer = (*Store)(nil)

// AcquireSlot implements [store.SlotAcquirer.AcquireSlot] in one write
// transaction: slot 0, 1, … are attempted as [Store.Acquire] attempts a
// lease, under the database's write lock, until one is taken. A slot
// taken is announced like any acquisition.
func (s *Store) AcquireSlot(ctx context.Context, p store.SlotParams) (store.SlotGrant, error) {
	if err := s.gate.Check("acquire"); err != nil {
		return store.SlotGrant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.SlotGrant{}, fmt.Errorf("sqlitestore: acquire slot: %w", err)
	}
	var (
		got store.SlotGrant
		all *store.SlotsHeldError
	)
	err := s.writeTx(ctx, "acquire slot", func(w *write) error {
		all = &store.SlotsHeldError{Name: p.Name, Held: make([]store.HeldError, p.Slots)}
		for k := range p.Slots {
			g, err := s.acquireOne(ctx, w, p.Acquire(k))
			var held *store.HeldError
			switch {
			case err == nil:
				got, all = store.SlotGrant{Grant: g, Slot: k}, nil
				return nil
			case errors.As(err, &held):
				all.Held[k] = *held
			default:
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return store.SlotGrant{}, err
	case all != nil:
		return store.SlotGrant{}, all
	}
	return got, nil
}
