package etcdstore

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tenure-dev/tenure/store"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Every lease name has up to seven keys under the store's prefix, and one
// more per follower in its line, each written only by the calls named
// here, so that every change is one transaction that never has to read a
// value before writing it:
//
//	held/<name>      the holder; attached to an etcd lease, so it exists only
//	                 while the tenure is held. Its create revision is the
//	                 token, its version the seq.
//	claim/<name>     empty, on no etcd lease: put by Acquire, deleted by
//	                 Release, each in the transaction that changes held/<name>,
//	                 and left alone by an expiry. A listener watches the
//	                 deletions in claim/ and held/ (adjacent ranges: nothing
//	                 this store writes sorts between them) and tells a
//	                 release, which deletes both keys in one revision, from
//	                 etcd expiring the lease, which deletes held/<name> alone.
//	start/<name>     the holder and acquisition time of the last tenure,
//	                 written only by Acquire, in the transaction that creates
//	                 held/<name>: its mod revision is that tenure's token.
//	seq/<name>       the seq the last renewal set; deleted by Acquire.
//	released/<name>  present when the last tenure was released; deleted by
//	                 Acquire.
//	announce/<name>  the last announcement of the lease, as
//	                 [storekit.EncodeNotice] writes it: put by Acquire (the
//	                 new tenure) and Release (the follower next in line) in
//	                 the transaction that makes the change. Listeners watch
//	                 the puts under announce/ and nothing else.
//	wait/<name>\x00<holder>
//	                 one follower in line, its value the holder; attached to
//	                 an etcd lease that ends twice the follower's TTL after
//	                 the expiry it was told, so etcd forgets a follower that
//	                 stops asking. Its create revision is its place: asking
//	                 again moves the key to a new etcd lease and keeps it.
//	                 A name holds no NUL (store.ValidateName), so the
//	                 prefix wait/<name>\x00 holds that name's line alone.
const (
	heldDir     = "held/"
	claimDir    = "claim/"
	startDir    = "start/"
	seqDir      = "seq/"
	releasedDir = "released/"
	announceDir = "announce/"
	waitDir     = "wait/"
)

// keys are the keys of one lease name.
type keys struct {
	held, claim, start, seq, released, announce string
	// line is the prefix of the keys of the followers in line.
	line string
}

func (s *Store) keys(name string) keys {
	return keys{
		held:     s.prefix + heldDir + name,
		claim:    s.prefix + claimDir + name,
		start:    s.prefix + startDir + name,
		seq:      s.prefix + seqDir + name,
		released: s.prefix + releasedDir + name,
		announce: s.prefix + announceDir + name,
		line:     s.prefix + waitDir + name + "\x00",
	}
}

// waiter is the key of holder h in the line.
func (k keys) waiter(h store.Holder) string { return k.line + encodeHolder(h) }

// holderValue is the value of a held/ key. Renewals and releases compare
// it byte for byte, so it must encode a holder in exactly one way:
// encoding/json writes struct fields in order and escapes deterministically.
type holderValue struct {
	Label    string `json:"label"`
	Instance string `json:"instance"`
}

// startValue is the value of a start/ key, written by every new tenure:
// its holder, start and payload (absent from keys written before payloads
// existed, which read as empty).
type startValue struct {
	Label      string    `json:"label"`
	Instance   string    `json:"instance"`
	AcquiredAt time.Time `json:"acquired_at"`
	Payload    string    `json:"payload,omitempty"`
}

func encodeHolder(h store.Holder) string {
	b, err := json.Marshal(holderValue{Label: h.Label, Instance: h.Instance})
	if err != nil {
		// Marshalling a struct of two strings cannot fail.
		return ""
	}
	return string(b)
}

// decodeHolder reads the value of a held/ or wait/ key.
func decodeHolder(kv *mvccpb.KeyValue) (store.Holder, error) {
	var v holderValue
	if err := json.Unmarshal(kv.Value, &v); err != nil {
		return store.Holder{}, err
	}
	return store.Holder{Label: v.Label, Instance: v.Instance}, nil
}

func encodeStart(h store.Holder, at time.Time, payload string) string {
	b, err := json.Marshal(startValue{Label: h.Label, Instance: h.Instance, AcquiredAt: at.UTC(), Payload: payload})
	if err != nil {
		// Marshalling strings and a UTC time of this era cannot fail.
		return ""
	}
	return string(b)
}

// snapshot is what one read of a lease's keys found; nil where a key is
// absent.
type snapshot struct {
	held, start, seq, released *mvccpb.KeyValue
}

// first returns the first key of a range response, or nil.
func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

func corrupt(name string, kv *mvccpb.KeyValue, err error) error {
	return fmt.Errorf("etcdstore: lease %q: key %q holds %q, which this store did not write (%v); delete the lease's keys or use another KeyPrefix",
		name, kv.Key, kv.Value, err)
}

// holder decodes the holder of a held/ key.
func (sn snapshot) holder(name string) (store.Holder, error) {
	h, err := decodeHolder(sn.held)
	if err != nil {
		return store.Holder{}, corrupt(name, sn.held, err)
	}
	return h, nil
}

// last decodes the start/ key: the last tenure's holder and start.
func (sn snapshot) last(name string) (startValue, error) {
	var v startValue
	if sn.start == nil {
		return v, nil
	}
	if err := json.Unmarshal(sn.start.Value, &v); err != nil {
		return v, corrupt(name, sn.start, err)
	}
	return v, nil
}

// lastSeq is the seq of the last tenure once it is no longer held: what the
// last renewal wrote, or 1 when there was none.
func (sn snapshot) lastSeq(name string) (int64, error) {
	if sn.seq == nil {
		return 1, nil
	}
	seq, err := strconv.ParseInt(string(sn.seq.Value), 10, 64)
	if err != nil || seq < 2 {
		return 0, corrupt(name, sn.seq, fmt.Errorf("not a seq: %v", err))
	}
	return seq, nil
}

// grant reports the lease as a [store.Grant], given the remaining time of
// a held one: the holder, token and seq of the held/ key while it exists,
// otherwise only the last tenure's token and seq.
func (sn snapshot) grant(name string, remaining time.Duration) (store.Grant, error) {
	g := store.Grant{Name: name}
	if sn.held != nil {
		h, err := sn.holder(name)
		if err != nil {
			return g, err
		}
		g.Holder, g.Token, g.Seq, g.Remaining = h, store.Token(sn.held.CreateRevision), sn.held.Version, remaining
		return g, nil
	}
	if sn.start == nil {
		return g, nil
	}
	seq, err := sn.lastSeq(name)
	if err != nil {
		return g, err
	}
	g.Token, g.Seq = store.Token(sn.start.ModRevision), seq
	return g, nil
}

// record reports the lease as a [store.Record]. The snapshot must have a
// start/ key.
func (sn snapshot) record(name string, remaining time.Duration) (store.Record, error) {
	g, err := sn.grant(name, remaining)
	if err != nil {
		return store.Record{}, err
	}
	last, err := sn.last(name)
	if err != nil {
		return store.Record{}, err
	}
	r := store.Record{Grant: g, AcquiredAt: last.AcquiredAt}
	r.Payload = last.Payload
	switch {
	case sn.held != nil:
		r.State = store.StateHeld
	case sn.released != nil:
		r.State = store.StateReleased
	default:
		r.State = store.StateExpired
	}
	if r.Holder == (store.Holder{}) {
		r.Holder = store.Holder{Label: last.Label, Instance: last.Instance}
	}
	return r, nil
}
