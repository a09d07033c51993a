package redisstore

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// replyGen turns fuzz bytes into a script reply as go-redis hands it over:
// int64, string, nil and nested []any values.
type replyGen struct {
	b []byte
	i int
}

func (g *replyGen) more() bool { return g.i < len(g.b) }

func (g *replyGen) byte() byte {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return g.b[g.i-1]
}

func (g *replyGen) int64() int64 {
	var buf [8]byte
	for i := range buf {
		buf[i] = g.byte()
	}
	return int64(binary.BigEndian.Uint64(buf[:]))
}

func (g *replyGen) value(depth int) any {
	switch g.byte() % 7 {
	case 0:
		return int64(int8(g.byte()))
	case 1:
		return g.int64()
	case 2:
		return strconv.FormatInt(int64(int8(g.byte())), 10)
	case 3:
		n := int(g.byte() % 8)
		s := make([]byte, 0, n)
		for range n {
			s = append(s, g.byte())
		}
		return string(s)
	case 4:
		return nil
	case 5:
		if depth > 1 {
			return nil
		}
		items := make([]any, g.byte()%10)
		for i := range items {
			items[i] = g.value(depth + 1)
		}
		return items
	default:
		return int64(g.byte() % 4) // a likely result kind
	}
}

// renewReply encodes results as renew.lua replies (its header describes
// the shape), the inverse of renewResults for results it can produce.
func renewReply(results []store.RenewResult) []any {
	var reply []any
	for _, res := range results {
		r := res.Grant
		rem := int64(r.Remaining / time.Millisecond)
		switch {
		case res.Renewed:
			reply = append(reply, int64(1), r.Seq, rem, r.At.UnixMicro())
		case r.Holder != (store.Holder{}):
			reply = append(reply, int64(3), r.Holder.Label, r.Holder.Instance, strconv.FormatInt(int64(r.Token), 10), r.Seq, rem)
		case r.Token != 0 || r.Seq != 0:
			reply = append(reply, int64(2), int64(r.Token), strconv.FormatInt(r.Seq, 10))
		default:
			reply = append(reply, int64(0))
		}
	}
	return reply
}

// FuzzRenewResults feeds renewResults, which decodes what the server sent
// back for a renewal batch, arbitrary replies. It must never panic; a reply
// it accepts gives one result per lease asked, in order, each naming its
// lease, a renewal keeping the holder and token asked for (only the server
// decides seq and remaining time); and the results encode back to a reply
// that decodes to the same results.
func FuzzRenewResults(f *testing.F) {
	f.Add([]byte{0, 6, 1, 0, 7, 6, 0, 0, 1, 44})
	f.Add([]byte{1, 6, 0, 6, 2, 0, 3, 2, 9})
	f.Add([]byte{2, 6, 3, 3, 1, 'l', 3, 2, 'i', 'd', 2, 5, 0, 9, 1, 0, 0, 0, 0, 0, 0, 0, 100, 6, 0})
	f.Add([]byte{0, 5, 3, 6, 1, 0, 7, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &replyGen{b: data}
		ps := make([]store.RenewParams, 1+g.byte()%4)
		for i := range ps {
			ps[i] = store.RenewParams{Name: "lease-" + strconv.Itoa(i), Holder: store.Holder{Label: "w", Instance: "i" + strconv.Itoa(i)},
				Token: store.Token(i + 1), Seq: int64(i + 1), TTL: time.Second}
		}
		var reply []any
		for g.more() {
			reply = append(reply, g.value(0))
		}
		var s Store
		results, ok := s.renewResults(ps, reply)
		if !ok {
			return // the caller reports an unexpected reply and uses none of it
		}
		require.Len(t, results, len(ps))
		for i, r := range results {
			require.Equal(t, ps[i].Name, r.Grant.Name)
			if r.Renewed {
				require.Equal(t, ps[i].Holder, r.Grant.Holder)
				require.Equal(t, ps[i].Token, r.Grant.Token)
			}
			require.GreaterOrEqual(t, s.highest.Load(), int64(r.Grant.Token), "every token seen is observed")
		}
		again, ok := s.renewResults(ps, renewReply(results))
		require.True(t, ok, "re-encoded results are refused")
		for i := range results {
			if results[i].Grant.Remaining%time.Millisecond != 0 {
				// A remaining time beyond what a Duration holds wrapped;
				// only its shape is checked.
				again[i].Grant.Remaining = results[i].Grant.Remaining
			}
		}
		require.Equal(t, results, again)
	})
}

// FuzzScan feeds scan, which decodes every record a read script returns,
// arbitrary replies against the record's shape. It must never panic; it
// accepts exactly an array of the right length whose elements each fit
// their destination (a string or nil for text, an integer or a decimal
// string for numbers), and then copies the values exactly.
func FuzzScan(f *testing.F) {
	f.Add([]byte{5, 10, 0, 1, 3, 1, 'l', 3, 1, 'i', 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 3, 2, 5, 0, 0, 0, 1, 0, 100, 3, 2, 'a', ':'})
	f.Add([]byte{5, 10, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4})
	f.Add([]byte{5, 3, 0, 1, 0, 2})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &replyGen{b: data}
		reply := g.value(0)
		var (
			found, acqS, acqUS, state, rem int64
			label, instance, payload       string
			tok                            store.Token
			seq                            int64
		)
		dst := []any{&found, &label, &instance, &tok, &seq, &acqS, &acqUS, &state, &rem, &payload}
		ok := scan(reply, dst...)
		items, isArray := reply.([]any)
		want := isArray && len(items) == len(dst)
		for i := 0; want && i < len(items); i++ {
			switch dst[i].(type) {
			case *string:
				switch items[i].(type) {
				case string, nil:
				default:
					want = false
				}
			default:
				switch v := items[i].(type) {
				case int64:
				case string:
					_, err := strconv.ParseInt(v, 10, 64)
					want = err == nil
				default:
					want = false
				}
			}
		}
		require.Equal(t, want, ok, "reply %#v", reply)
		if !ok {
			return
		}
		text := func(v any) string { s, _ := v.(string); return s }
		num := func(v any) int64 {
			if n, isInt := v.(int64); isInt {
				return n
			}
			n, err := strconv.ParseInt(v.(string), 10, 64)
			require.NoError(t, err)
			return n
		}
		require.Equal(t, []any{num(items[0]), text(items[1]), text(items[2]), store.Token(num(items[3])), num(items[4]),
			num(items[5]), num(items[6]), num(items[7]), num(items[8]), text(items[9])},
			[]any{found, label, instance, tok, seq, acqS, acqUS, state, rem, payload})
	})
}
