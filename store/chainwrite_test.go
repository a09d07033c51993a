package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store"
)

// chainWrite is a store.ChainWrite made of its values.
type chainWrite struct {
	name   string
	holder store.Holder
	token  store.Token
	seq    int64
}

func (w chainWrite) Name() string         { return w.name }
func (w chainWrite) Holder() store.Holder { return w.holder }
func (w chainWrite) Token() store.Token   { return w.token }
func (w chainWrite) Seq() int64           { return w.seq }
func (chainWrite) Commit(int64)           {}
func (chainWrite) Abort()                 {}

func TestValidateChainWrite(t *testing.T) {
	t.Parallel()
	h := store.Holder{Label: "worker", Instance: "i-1"}
	for name, tc := range map[string]struct {
		w    store.ChainWrite
		want string // part of the error; empty: accepted
	}{
		"Valid":         {w: chainWrite{name: "billing", holder: h, token: 7, seq: 3}},
		"Nil":           {w: nil, want: "the chain write is nil; pass the one tenure's Lease.BeginChainWrite returned"},
		"EmptyName":     {w: chainWrite{holder: h, token: 7, seq: 3}, want: "lease name is empty"},
		"ControlName":   {w: chainWrite{name: "a\nb", holder: h, token: 7, seq: 3}, want: "control character U+000A"},
		"ZeroToken":     {w: chainWrite{name: "billing", holder: h, seq: 3}, want: `token is 0 for lease "billing": the tenure is no longer trusted; do not write`},
		"NegativeToken": {w: chainWrite{name: "billing", holder: h, token: -1, seq: 3}, want: `token -1 for lease "billing" is negative`},
		"NoHolder":      {w: chainWrite{name: "billing", token: 7, seq: 3}, want: `lease "billing": `},
		"ZeroSeq":       {w: chainWrite{name: "billing", holder: h, token: 7}, want: `seq 0 for lease "billing" must be positive`},
		"NegativeSeq":   {w: chainWrite{name: "billing", holder: h, token: 7, seq: -2}, want: `seq -2 for lease "billing" must be positive`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := store.ValidateChainWrite(tc.w)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
