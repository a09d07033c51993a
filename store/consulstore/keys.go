package consulstore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/hashicorp/consul/api"
)

// Key suffixes under a lease's directory, <prefix><escaped name>/.
const (
	suffixLease   = "lease"
	suffixCounter = "counter"
	// suffixLine is the directory of the followers in line, one key each.
	suffixLine = "wait/"
)

// escapeName turns a lease name into one key segment: ASCII letters,
// digits, '-', '_' and '.' (except a leading one) stay as they are, every
// other byte becomes %XX. The segment never contains "/" and is never "."
// or "..", so keys stay unambiguous and safe in URL paths.
func escapeName(name string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(name))
	for i := 0; i < len(name); i++ {
		c := name[i]
		if keepByte(c) && (c != '.' || i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

func keepByte(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '-' || c == '_' || c == '.'
}

// unescapeName reverses [escapeName]. It reports false for a segment that
// escapeName cannot have produced.
func unescapeName(seg string) (string, bool) {
	var b strings.Builder
	b.Grow(len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c != '%' {
			if !keepByte(c) || (c == '.' && i == 0) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(seg) {
			return "", false
		}
		v, err := strconv.ParseUint(seg[i+1:i+3], 16, 8)
		if err != nil || seg[i+1:i+3] != strings.ToUpper(seg[i+1:i+3]) {
			return "", false
		}
		if keepByte(byte(v)) && (byte(v) != '.' || i > 0) {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	name := b.String()
	return name, name != ""
}

// keys are the KV keys of one lease name.
type keys struct {
	dir     string // <prefix><escaped name>/, the prefix of every key
	lease   string // the lease record, locked by the holder's session
	counter string // the token counter; its ModifyIndex is the token
	line    string // the prefix of the followers' keys, one per follower
}

func (s *Store) keys(name string) keys {
	dir := s.cfg.KeyPrefix + escapeName(name) + "/"
	return keys{dir: dir, lease: dir + suffixLease, counter: dir + suffixCounter, line: dir + suffixLine}
}

// waiter is the key of follower h in the line: its label and instance,
// joined by a NUL (which neither may hold) and escaped as a name is, so
// that every holder has a key of its own.
func (k keys) waiter(h store.Holder) string {
	return k.line + escapeName(h.Label+"\x00"+h.Instance)
}

// follower is one follower in the line, as read: its holder, its key's
// CreateIndex (its place: first come first) and the session that keeps
// the key (see [Store.wait]).
type follower struct {
	holder  store.Holder
	created uint64
	session string
}

// waitValue is what a follower's key holds, as JSON.
type waitValue struct {
	Label    string `json:"holder_label"`
	Instance string `json:"holder_instance"`
}

// value is what the lease record holds, as JSON. The token is not in it:
// it is the counter key's ModifyIndex (see the package documentation).
// Payload is written by the acquisition and carried unchanged by every
// renewal and the release (records written before payloads existed lack
// it and read as empty).
type value struct {
	Label      string    `json:"holder_label"`
	Instance   string    `json:"holder_instance"`
	Seq        int64     `json:"seq"`
	TTLMillis  int64     `json:"ttl_ms"`
	AcquiredAt time.Time `json:"acquired_at"`
	Released   bool      `json:"released"`
	Payload    string    `json:"payload,omitempty"`
}

func (v value) holder() store.Holder { return store.Holder{Label: v.Label, Instance: v.Instance} }

func (v value) ttl() time.Duration { return time.Duration(v.TTLMillis) * time.Millisecond }

func (v value) encode() ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the lease record: %w", err)
	}
	return b, nil
}

// lease is one lease as read from Consul: its record and its counter.
type lease struct {
	name string
	// exists reports whether the lease record exists.
	exists bool
	// val is the decoded record; index its ModifyIndex, session the
	// session that holds its lock ("" when nobody does).
	val     value
	index   uint64
	session string
	// token is the counter's ModifyIndex (0 when there is no counter),
	// which is also what the acquisition's compare-and-set on the counter
	// checks; tenures is the counter's value, the number of tenures so far.
	token   store.Token
	tenures uint64
	// line is the followers in line, first come first.
	line []follower
}

// held reports whether the lease is held: its record is locked by a
// session, which Consul releases when the session is invalidated.
func (l lease) held() bool { return l.exists && l.session != "" && !l.val.Released }

// grant reports the lease as a [store.Grant]: with its holder and
// remaining time while it is held, with neither when it is not.
func (l lease) grant() store.Grant {
	g := store.Grant{Name: l.name, Token: l.token}
	if !l.exists {
		return g
	}
	g.Seq = l.val.Seq
	if l.held() {
		g.Holder = l.val.holder()
		g.Remaining = l.val.ttl()
	}
	return g
}

// record reports the lease as a [store.Record], naming the last holder
// even when it is no longer held.
func (l lease) record() store.Record {
	r := store.Record{Grant: l.grant(), AcquiredAt: l.val.AcquiredAt}
	r.Holder = l.val.holder()
	r.Payload = l.val.Payload
	switch {
	case l.val.Released:
		r.State = store.StateReleased
	case l.held():
		r.State = store.StateHeld
	default:
		r.State = store.StateExpired
	}
	return r
}

// head is the follower at the head of the line (zero when nobody waits).
func (l lease) head() store.Holder {
	if len(l.line) == 0 {
		return store.Holder{}
	}
	return l.line[0].holder
}

// place returns h's place in the line (1: next) and the session that
// keeps its key, or 0 when h is not in line.
func (l lease) place(h store.Holder) (int, string) {
	for i, f := range l.line {
		if f.holder == h {
			return i + 1, f.session
		}
	}
	return 0, ""
}

// heldError reports the lease as held, for a refused acquisition.
func (l lease) heldError() *store.HeldError {
	return &store.HeldError{Name: l.name, Holder: l.val.holder(), Token: l.token, Seq: l.val.Seq, Remaining: l.val.ttl(), Payload: l.val.Payload}
}

// parseLease builds a lease from the entries under its directory k.dir.
func parseLease(name string, k keys, entries []*api.KVPair) (lease, error) {
	l := lease{name: name}
	for _, e := range entries {
		switch e.Key {
		case k.lease:
			if e.ModifyIndex == 0 {
				continue // get-or-empty of an absent key
			}
			if err := json.Unmarshal(e.Value, &l.val); err != nil {
				return lease{}, fmt.Errorf("key %q does not hold a lease record written by consulstore; is another program writing under this KeyPrefix? %w",
					e.Key, err)
			}
			l.exists, l.index, l.session = true, e.ModifyIndex, e.Session
		case k.counter:
			if e.ModifyIndex == 0 {
				continue
			}
			l.token = store.Token(e.ModifyIndex)
			l.tenures, _ = strconv.ParseUint(string(e.Value), 10, 64)
		default:
			if !strings.HasPrefix(e.Key, k.line) || e.ModifyIndex == 0 {
				continue
			}
			f, err := parseFollower(e)
			if err != nil {
				return lease{}, err
			}
			l.line = append(l.line, f)
		}
	}
	slices.SortFunc(l.line, func(a, b follower) int { return cmp.Compare(a.created, b.created) })
	return l, nil
}

// parseFollower decodes the key of one follower in line.
func parseFollower(e *api.KVPair) (follower, error) {
	var v waitValue
	if err := json.Unmarshal(e.Value, &v); err != nil {
		return follower{}, fmt.Errorf("key %q does not hold a follower written by consulstore; is another program writing under this KeyPrefix? %w", e.Key, err)
	}
	return follower{holder: store.Holder{Label: v.Label, Instance: v.Instance}, created: e.CreateIndex, session: e.Session}, nil
}
