package fence_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence"
)

type triple struct {
	lease string
	tok   store.Token
	step  string
}

func key(tr triple) string { return fence.IdempotencyKey(tr.lease, tr.tok, tr.step) }

var keyFormat = regexp.MustCompile(`^tenure-[0-9a-f]{32}$`)

// TestIdempotencyKeyGolden pins the format: a key must never change between
// versions, or a step retried across an upgrade would run twice.
func TestIdempotencyKeyGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   triple
		want string
	}{
		{triple{"nightly-billing", 42, "email:customer-7"}, "tenure-" + reference("nightly-billing", 42, "email:customer-7")},
		{triple{"", 0, ""}, "tenure-" + reference("", 0, "")},
		{triple{"nightly-billing", 42, "email:customer-7"}, "tenure-d0fa1dcdea5811ec40ff34c0cc95454a"},
	} {
		require.Equal(t, tc.want, key(tc.in), "%+v", tc.in)
	}
}

// reference computes the key as the documentation describes it, spelled
// out byte by byte.
func reference(lease string, tok int64, step string) string {
	be := func(v uint64) string {
		return string([]byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	input := "tenure idempotency key v1" + be(uint64(len(lease))) + lease + be(uint64(tok)) + be(uint64(len(step))) + step
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:16])
}

// TestIdempotencyKeyUnambiguous: fields that would run together in a naive
// concatenation still give distinct keys.
func TestIdempotencyKeyUnambiguous(t *testing.T) {
	t.Parallel()
	for name, pair := range map[string][2]triple{
		"SeparatorMovesAcrossFields": {{"a:b", 1, "c"}, {"a", 1, "b:c"}},
		"SlashInLease":               {{"a/1", 2, "x"}, {"a", 12, "x"}},
		"DigitsMoveIntoToken":        {{"job1", 23, "s"}, {"job", 123, "s"}},
		"EmptyLeaseVsEmptyStep":      {{"", 1, "x"}, {"x", 1, ""}},
		"NulBytes":                   {{"a\x00", 1, "b"}, {"a", 1, "\x00b"}},
		"LengthLookalike":            {{"\x00\x00\x00\x00\x00\x00\x00\x01a", 1, ""}, {"", 1, "a"}},
		"TokenSign":                  {{"l", 1, "s"}, {"l", -1, "s"}},
		"TokenBytesInStep":           {{"l", 0, "\x00\x00\x00\x00\x00\x00\x00\x00"}, {"l", 0, ""}},
		"TokenBytesShift":            {{"a", 1, "bc"}, {"a\x00", 0x0162, "c"}},
		"NextTenure":                 {{"l", 7, "s"}, {"l", 8, "s"}},
		"OtherStep":                  {{"l", 7, "email"}, {"l", 7, "charge"}},
		"OtherLease":                 {{"billing", 7, "s"}, {"reports", 7, "s"}},
		"Unicode":                    {{"é", 1, "s"}, {"e\u0301", 1, "s"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := key(pair[0]), key(pair[1])
			require.NotEqual(t, a, b, "%+v and %+v", pair[0], pair[1])
			require.Regexp(t, keyFormat, a)
			require.Regexp(t, keyFormat, b)
			require.Equal(t, a, key(pair[0]), "stable")
		})
	}
}

// FuzzIdempotencyKey: equal triples give equal keys, distinct triples
// distinct keys, every key in the documented format.
func FuzzIdempotencyKey(f *testing.F) {
	f.Add("a:b", int64(1), "c", "a", int64(1), "b:c")
	f.Add("job", int64(7), "email", "job", int64(8), "email")
	f.Add("", int64(0), "", "", int64(0), "")
	f.Add("x\x00", int64(-1), "", "x", int64(-1), "\x00")
	f.Add("a", int64(1), "bc", "a\x00", int64(0x0162), "c")
	f.Fuzz(func(t *testing.T, l1 string, t1 int64, s1 string, l2 string, t2 int64, s2 string) {
		a, b := triple{l1, store.Token(t1), s1}, triple{l2, store.Token(t2), s2}
		ka, kb := key(a), key(b)
		if !keyFormat.MatchString(ka) {
			t.Fatalf("key %q of %+v is not in the documented format", ka, a)
		}
		if (a == b) != (ka == kb) {
			t.Fatalf("%+v -> %s, %+v -> %s", a, ka, b, kb)
		}
		if ka != "tenure-"+reference(l1, t1, s1) {
			t.Fatalf("key %s of %+v differs from the documented construction", ka, a)
		}
	})
}

func ExampleIdempotencyKey() {
	// Under tenure 42 of the lease "nightly-billing", the step that emails
	// customer 7 always carries the same key, however often it is retried.
	k := fence.IdempotencyKey("nightly-billing", 42, "email:customer-7")
	fmt.Println(k)
	fmt.Println(k == fence.IdempotencyKey("nightly-billing", 42, "email:customer-7"))
	// Output:
	// tenure-d0fa1dcdea5811ec40ff34c0cc95454a
	// true
}
