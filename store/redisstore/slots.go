package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/store"
)

var _ store.SlotAcquirer = (*Store)(nil)

var (
	//go:embed scripts/acquire_slot_tail.lua
	acquireSlotTail string
	// acquireSlotScript is acquire.lua with its loop over a batch replaced
	// by the loop of acquire_slot_tail.lua, which stops at the first slot
	// acquired: one lease is acquired by the same Lua however it is asked.
	acquireSlotScript = redis.NewScript(acquireSlotSrc())
)

// acquireBatchLoop begins the loop over a batch at the end of acquire.lua.
const acquireBatchLoop = "local results = {}\n"

func acquireSlotSrc() string {
	head, _, ok := strings.Cut(acquireSrc, acquireBatchLoop)
	if !ok {
		// The slot tests fail on this script's error with this text.
		return "return redis.error_reply('ERR tenure acquire slot: acquire.lua no longer ends with its batch loop; redisstore/slots.go must be updated')"
	}
	return head + acquireSlotTail
}

// AcquireSlot implements [store.SlotAcquirer.AcquireSlot] in one script,
// atomic at the server: slot 0, 1, … are attempted by acquire.lua's rules
// until one is taken. A slot taken is announced like any acquisition.
func (s *Store) AcquireSlot(ctx context.Context, p store.SlotParams) (store.SlotGrant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.SlotGrant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.SlotGrant{}, fmt.Errorf("redisstore: acquire slot: %w", err)
	}
	op := fmt.Sprintf("acquire a slot of %q", p.Name)
	floor := store.Token(s.highest.Load())
	keys := make([]string, 0, 1+3*p.Slots)
	keys = append(keys, s.keys.Counter)
	args := make([]any, 0, 1+6*p.Slots)
	args = append(args, s.keys.Channel)
	for k := range p.Slots {
		n := store.SlotName(p.Name, k)
		keys = append(keys, s.keys.Record(n), s.keys.Held(n), s.keys.Line(n))
		args = append(args, p.Holder.Label, p.Holder.Instance, milliseconds(p.TTL), n, p.Payload, flag(false))
	}
	reply, err := acquireSlotScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return store.SlotGrant{}, interpretError(op, err)
	}
	if len(reply)%acquireReply != 0 || len(reply) == 0 || len(reply) > acquireReply*p.Slots {
		return store.SlotGrant{}, unexpectedReply(op, reply)
	}
	all := &store.SlotsHeldError{Name: p.Name, Held: make([]store.HeldError, p.Slots)}
	for k := range len(reply) / acquireReply {
		g, err := s.acquired(ctx, p.Acquire(k), floor, reply[acquireReply*k:acquireReply*(k+1)])
		var held *store.HeldError
		switch {
		case err == nil:
			return store.SlotGrant{Grant: g, Slot: k}, nil
		case errors.As(err, &held):
			all.Held[k] = *held
		default:
			return store.SlotGrant{}, err
		}
	}
	if len(reply) != acquireReply*p.Slots {
		return store.SlotGrant{}, unexpectedReply(op, reply)
	}
	return store.SlotGrant{}, all
}
