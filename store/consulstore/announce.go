package consulstore

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

const (
	// announceKeyName is the key, right under [Config.KeyPrefix], that
	// every acquisition and release rewrites in its own transaction. Lease
	// directories never start with '.' (see escapeName), so it cannot be
	// one.
	announceKeyName = ".announce"
	// announceKept is how many of the latest announcements the key keeps,
	// so that a listener that missed a few (it was busy delivering, or two
	// came within one blocking query) still delivers each of them.
	announceKept = 8
)

// announced is one announcement: lease Name changed hands. Notice is the
// announcement as [storekit.EncodeNotice] writes it (an acquisition with
// its holder and TTL, a release with the head of the line); Name is
// repeated for the older versions of this store, which read an entry
// without the kind they knew as a change of that lease.
type announced struct {
	Seq    uint64 `json:"seq"`
	Name   string `json:"name"`
	Notice string `json:"notice,omitempty"`
}

// newAnnounced returns the announcement of n.
func newAnnounced(n store.Notice) announced {
	return announced{Name: n.Name, Notice: storekit.EncodeNotice(n)}
}

// notice is a as a [store.Notice]. An entry written by an older version of
// this store carries no Notice and reads as a [store.NoticeChanged] of its
// lease.
func (a announced) notice() store.Notice {
	if a.Notice == "" {
		return store.Notice{Name: a.Name, Kind: store.NoticeChanged}
	}
	return storekit.DecodeNotice(a.Notice)
}

// announcements is the value of the announcement key: the number of
// announcements made so far under the prefix and the latest few of them,
// oldest first.
type announcements struct {
	Seq    uint64      `json:"seq"`
	Recent []announced `json:"recent"`
}

// board is the announcement key as read before a write: its value and
// ModifyIndex (0 when absent), which the write's compare-and-set checks.
type board struct {
	index uint64
	val   announcements
}

// parseBoard decodes the announcement key e (nil, or a get-or-empty entry
// with ModifyIndex 0, when it is absent).
func parseBoard(e *api.KVPair) (board, error) {
	if e == nil || e.ModifyIndex == 0 {
		return board{}, nil
	}
	var b board
	if err := json.Unmarshal(e.Value, &b.val); err != nil {
		return board{}, fmt.Errorf("key %q does not hold announcements written by consulstore; is another program writing under this KeyPrefix? %w", e.Key, err)
	}
	b.index = e.ModifyIndex
	return b, nil
}

// op returns the transaction operation that adds as to the board, in
// order: a compare-and-set on the index read (0: only if the key is still
// absent), so announcements are numbered without gaps. The key keeps the
// latest [announceKept] of them, those of a transaction that announces
// more included.
func (b board) op(key string, as ...announced) (*api.TxnOp, error) {
	next := announcements{Seq: b.val.Seq + uint64(len(as))}
	all := slices.Concat(b.val.Recent, as)
	for i := range as {
		all[len(b.val.Recent)+i].Seq = b.val.Seq + uint64(i) + 1
	}
	next.Recent = all[max(0, len(all)-announceKept):]
	body, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("encoding the announcements: %w", err)
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: key, Index: b.index, Value: body}}, nil
}

// boardWritten returns the board as the transaction of index that applied
// op, an operation of [board.op], left it.
func boardWritten(op *api.TxnOp, index uint64) (board, error) {
	return parseBoard(&api.KVPair{Key: op.KV.Key, Value: op.KV.Value, ModifyIndex: index})
}

// news returns what a listener that last saw announcement seq delivers on
// reading now: each announcement after seq, oldest first, preceded by the
// empty notice when some of them are no longer kept (or the count went
// backwards: the key was deleted or the cluster restored), so that the
// caller looks again at everything. It also returns the seq now seen.
func news(seq uint64, now announcements) ([]store.Notice, uint64) {
	if now.Seq == seq {
		return nil, seq
	}
	var out []store.Notice
	if now.Seq < seq {
		return []store.Notice{{}}, now.Seq
	}
	first := now.Seq + 1 // the oldest announcement kept
	for _, a := range now.Recent {
		first = min(first, a.Seq)
	}
	if first > seq+1 {
		out = append(out, store.Notice{})
	}
	for _, a := range now.Recent {
		if a.Seq > seq {
			out = append(out, a.notice())
		}
	}
	return out, now.Seq
}
