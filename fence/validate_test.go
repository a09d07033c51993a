package fence_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store"
)

func TestValidateWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		resource string
		tok      store.Token
		want     []string // parts of the error; none: accepted
	}{
		{name: "Plain", resource: "orders", tok: 1},
		{name: "Unicode", resource: "café/ünïcode:🙂", tok: 1},
		{name: "LongestName", resource: strings.Repeat("r", store.MaxNameLen), tok: 1},
		{name: "HighestToken", resource: "r", tok: 1<<63 - 1},
		{name: "Empty", resource: "", tok: 1,
			want: []string{"resource is empty", "name the resource the write changes with 1 to 255 bytes"}},
		{name: "TooLong", resource: strings.Repeat("r", store.MaxNameLen+1), tok: 1,
			want: []string{"resource is 256 bytes long; the maximum is 255"}},
		{name: "InvalidUTF8", resource: "r\xff", tok: 1,
			want: []string{`resource "r\xff" is not valid UTF-8`}},
		{name: "NewLine", resource: "a\nb", tok: 1,
			want: []string{"contains the control character U+000A"}},
		{name: "Delete", resource: "a\x7fb", tok: 1,
			want: []string{"contains the control character U+007F"}},
		{name: "C1Control", resource: "a\u0085b", tok: 1,
			want: []string{"contains the control character U+0085"}},
		{name: "RightToLeftOverride", resource: "orders\u202e", tok: 1,
			want: []string{`resource "orders\u202e" contains the bidirectional control U+202E`, "visible UTF-8 characters"}},
		{name: "LeftToRightIsolate", resource: "\u2066orders", tok: 1,
			want: []string{"bidirectional control U+2066"}},
		{name: "ZeroWidthSpace", resource: "ord\u200bers", tok: 1,
			want: []string{`resource "ord\u200bers" contains the invisible format character U+200B`}},
		{name: "ByteOrderMark", resource: "\ufefforders", tok: 1,
			want: []string{"invisible format character U+FEFF"}},
		{name: "ZeroToken", resource: "orders", tok: 0,
			want: []string{"token is 0: the lease is no longer trusted; do not write", `(resource "orders")`}},
		{name: "NegativeToken", resource: "orders", tok: -3,
			want: []string{"token -3 is negative; pass the token the store handed out", `(resource "orders")`}},
		{name: "NameCheckedFirst", resource: "", tok: 0,
			want: []string{"resource is empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := fence.ValidateWrite(tc.resource, tc.tok)
			if len(tc.want) == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestValidateToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tok  store.Token
		want string // part of the error; empty: accepted
	}{
		{"One", 1, ""},
		{"Max", 1<<63 - 1, ""},
		{"Zero", 0, "no longer trusted"},
		{"Negative", -1, "token -1 is negative"},
		{"Min", -1 << 63, "is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := fence.ValidateToken(tc.tok)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
