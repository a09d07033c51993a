package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// badNames are lease names every store must refuse.
var badNames = map[string]string{
	"Empty":         "",
	"TooLong":       strings.Repeat("n", store.MaxNameLen+1),
	"TooLongUTF8":   strings.Repeat("é", store.MaxNameLen/2+1),
	"NotUTF8":       "lease\xff",
	"Newline":       "lease\nname",
	"NUL":           "lease\x00name",
	"DEL":           "lease\x7fname",
	"C1Control":     "lease\u0085name",
	"TruncatedRune": "lease\xc3",
	"RTLOverride":   "lease\u202ename",
	"ZeroWidth":     "lea\u200bse",
}

// goodNames are lease names at the edges of what every store must accept.
var goodNames = map[string]string{
	"MaxLen":      strings.Repeat("n", store.MaxNameLen),
	"MaxLenUTF8":  strings.Repeat("é", store.MaxNameLen/2) + "n",
	"Unicode":     "lease-ünïcödé-名前-🔒",
	"Punctuation": `lease/with spaces:and'quotes"and;semicolons%_\`,
	"SQLish":      "lease'); DROP TABLE leases; --",
}

func testInput(t *testing.T, h Harness) {
	t.Run("BadAcquire", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		holder := testutil.Holder(t, "holder")
		cases := map[string]store.AcquireParams{
			"EmptyLabel":      {Name: n, Holder: store.Holder{Instance: holder.Instance}, TTL: longTTL},
			"EmptyInstance":   {Name: n, Holder: store.Holder{Label: holder.Label}, TTL: longTTL},
			"ZeroHolder":      {Name: n, TTL: longTTL},
			"LabelTooLong":    {Name: n, Holder: store.Holder{Label: strings.Repeat("l", store.MaxLabelLen+1), Instance: holder.Instance}, TTL: longTTL},
			"InstanceTooLong": {Name: n, Holder: store.Holder{Label: holder.Label, Instance: strings.Repeat("i", store.MaxInstanceLen+1)}, TTL: longTTL},
			"LabelControl":    {Name: n, Holder: store.Holder{Label: "a\tb", Instance: holder.Instance}, TTL: longTTL},
			"ZeroTTL":         {Name: n, Holder: holder},
			"NegativeTTL":     {Name: n, Holder: holder, TTL: -time.Second},
			"PayloadTooLong":  {Name: n, Holder: holder, TTL: longTTL, Payload: strings.Repeat("p", store.MaxPayloadLen+1)},
			"PayloadNotUTF8":  {Name: n, Holder: holder, TTL: longTTL, Payload: "addr\xff"},
			"PayloadNUL":      {Name: n, Holder: holder, TTL: longTTL, Payload: "addr\x00"},
			"PayloadNewline":  {Name: n, Holder: holder, TTL: longTTL, Payload: "addr\nmore"},
			"PayloadRTL":      {Name: n, Holder: holder, TTL: longTTL, Payload: "addr\u202e"},
		}
		for label, bad := range badNames {
			cases["Name"+label] = store.AcquireParams{Name: bad, Holder: holder, TTL: longTTL}
		}
		for label, p := range cases {
			_, err := b.store.Acquire(t.Context(), p)
			require.ErrorIs(t, err, store.ErrInvalid, "case %s", label)
		}
		b.requireAbsent(t, n, "refused acquisitions create nothing")
	})

	t.Run("BadRenew", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		good := store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
		with := func(change func(p *store.RenewParams)) store.RenewParams {
			p := good
			change(&p)
			return p
		}
		entries := map[string]store.RenewParams{
			"EmptyLabel":      with(func(p *store.RenewParams) { p.Holder.Label = "" }),
			"EmptyInstance":   with(func(p *store.RenewParams) { p.Holder.Instance = "" }),
			"InstanceTooLong": with(func(p *store.RenewParams) { p.Holder.Instance = strings.Repeat("i", store.MaxInstanceLen+1) }),
			"ZeroToken":       with(func(p *store.RenewParams) { p.Token = 0 }),
			"NegativeToken":   with(func(p *store.RenewParams) { p.Token = -1 }),
			"ZeroSeq":         with(func(p *store.RenewParams) { p.Seq = 0 }),
			"NegativeSeq":     with(func(p *store.RenewParams) { p.Seq = -1 }),
			"ZeroTTL":         with(func(p *store.RenewParams) { p.TTL = 0 }),
			"NegativeTTL":     with(func(p *store.RenewParams) { p.TTL = -time.Second }),
		}
		for label, bad := range badNames {
			entries["Name"+label] = with(func(p *store.RenewParams) { p.Name = bad })
		}
		batches := map[string][]store.RenewParams{
			"Duplicate": {good, good},
		}
		for label, bad := range entries {
			batches[label+"Alone"] = []store.RenewParams{bad}
			// The good entry comes first: a store that renews entry by
			// entry would renew it before meeting the bad one.
			batches[label+"AfterGood"] = []store.RenewParams{good, bad}
		}
		tooMany := make([]store.RenewParams, store.MaxRenewBatch+1)
		tooMany[0] = good
		for i := 1; i < len(tooMany); i++ {
			tooMany[i] = with(func(p *store.RenewParams) { p.Name = fmt.Sprintf("%s_%05d", g.Name, i) })
		}
		batches["TooMany"] = tooMany

		for label, ps := range batches {
			rs, err := b.store.Renew(t.Context(), ps)
			require.ErrorIs(t, err, store.ErrInvalid, "batch %s", label)
			require.Empty(t, rs, "batch %s", label)
		}
		b.requireHeld(t, g, 1)
	})

	t.Run("BadRelease", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		cases := map[string]store.ReleaseParams{
			"EmptyLabel":    {Name: g.Name, Holder: store.Holder{Instance: g.Holder.Instance}, Token: g.Token},
			"EmptyInstance": {Name: g.Name, Holder: store.Holder{Label: g.Holder.Label}, Token: g.Token},
			"ZeroToken":     {Name: g.Name, Holder: g.Holder},
			"NegativeToken": {Name: g.Name, Holder: g.Holder, Token: -g.Token},
		}
		for label, bad := range badNames {
			cases["Name"+label] = store.ReleaseParams{Name: bad, Holder: g.Holder, Token: g.Token}
		}
		for label, p := range cases {
			err := b.store.Release(t.Context(), p)
			require.ErrorIs(t, err, store.ErrInvalid, "case %s", label)
		}
		b.requireHeld(t, g, 1)
	})

	t.Run("BadGet", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		for label, bad := range badNames {
			_, err := b.store.Get(t.Context(), bad)
			require.ErrorIs(t, err, store.ErrInvalid, "name %s", label)
		}
	})

	t.Run("EdgeNames", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		holder := testutil.Holder(t, "holder")
		for label, n := range goodNames {
			require.NoError(t, store.ValidateName(n), "name %s", label)
			g := b.acquire(t, n, holder, longTTL)
			res := b.renew(t, g, longTTL)
			require.True(t, res.Renewed, "name %s", label)
			b.requireHeld(t, g, 2)
			b.release(t, res.Grant)
			require.Equal(t, store.StateReleased, b.get(t, n).State, "name %s", label)
		}
	})

	t.Run("EdgeHolders", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		prefix := name(t)
		for i, holder := range []store.Holder{
			{Label: strings.Repeat("l", store.MaxLabelLen), Instance: strings.Repeat("i", store.MaxInstanceLen)},
			{Label: "ünïcödé 名前", Instance: "x"},
			{Label: `quote'"/\%_`, Instance: "semi;colon"},
		} {
			g := b.acquire(t, fmt.Sprintf("%s_%d", prefix, i), holder, longTTL)
			b.requireHeld(t, g, 1)
			held := b.acquireHeld(t, g.Name, testutil.Holder(t, "other"), longTTL)
			require.Equal(t, holder, held.Holder)
		}
	})
}
