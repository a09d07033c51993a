package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/store"
)

var _ store.SlotAcquirer = (*Store)(nil)

// AcquireSlot implements [store.SlotAcquirer.AcquireSlot] in one
// statement, the acquire_slot function (functions/acquire_slot.sql),
// which tries slot 0, 1, … with the acquire function's rules and stops at
// the first it takes. A slot taken is announced like any acquisition. An
// error matching [store.ErrUnavailable] means a slot may have been taken.
func (s *Store) AcquireSlot(ctx context.Context, p store.SlotParams) (store.SlotGrant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.SlotGrant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.SlotGrant{}, fmt.Errorf("pgstore: acquire slot: %w", err)
	}
	op := fmt.Sprintf("acquire a slot of %q", p.Name)
	rows, err := s.pool.Query(ctx, s.acquireSlotSQL,
		p.Name, p.Slots, p.Holder.Label, p.Holder.Instance, p.TTL.Microseconds(), p.Payload)
	if err != nil {
		return store.SlotGrant{}, interpretError(op, err)
	}
	type slotRow struct {
		slot        int32
		acquired    bool
		g           store.Grant
		remainingUS int64
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (slotRow, error) {
		var r slotRow
		return r, row.Scan(&r.slot, &r.acquired, &r.g.Holder.Label, &r.g.Holder.Instance, &r.g.Token, &r.g.Seq,
			&r.remainingUS, &r.g.Payload, &r.g.At)
	})
	if err != nil {
		return store.SlotGrant{}, interpretError(op, err)
	}
	all := &store.SlotsHeldError{Name: p.Name, Held: make([]store.HeldError, p.Slots)}
	for i, r := range found {
		if int(r.slot) != i || i >= p.Slots {
			return store.SlotGrant{}, fmt.Errorf("pgstore: %s: %w: the server answered slot %d as its answer %d of %d slots",
				op, store.ErrUnavailable, r.slot, i, p.Slots)
		}
		r.g.Name = store.SlotName(p.Name, i)
		r.g.Remaining = time.Duration(r.remainingUS) * time.Microsecond
		r.g.At = r.g.At.UTC()
		if r.acquired {
			return store.SlotGrant{Grant: r.g, Slot: i}, nil
		}
		all.Held[i] = store.HeldError{Name: r.g.Name, Holder: r.g.Holder, Token: r.g.Token, Seq: r.g.Seq,
			Remaining: r.g.Remaining, Payload: r.g.Payload}
	}
	if len(found) != p.Slots {
		return store.SlotGrant{}, fmt.Errorf("pgstore: %s: %w: the server answered %d of %d slots and took none",
			op, store.ErrUnavailable, len(found), p.Slots)
	}
	return store.SlotGrant{}, all
}
