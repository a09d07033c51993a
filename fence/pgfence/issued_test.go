package pgfence_test

import (
	"math"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// TestNotIssued: a fence takes only tokens the store's sequence issued
// (the bundle counts the first 100 as issued); a token above refuses with
// its own error and changes nothing. FenceForeign takes any token, but only
// for a role granted it by hand.
func TestNotIssued(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]pgx.QueryExecMode{
		"CacheStatement": pgx.QueryExecModeCacheStatement,
		"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode)
			ctx := t.Context()
			require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", 100), "the last issued token passes")
			for _, tok := range []store.Token{101, math.MaxInt64} {
				err := b.fencer.Fence(ctx, b.pool, "r", tok)
				require.ErrorIs(t, err, fence.ErrNotIssued)
				require.ErrorIs(t, err, store.ErrInvalid)
				require.NotErrorIs(t, err, store.ErrFenced)
				require.ErrorContains(t, err, "above the last token the store issued (100)")
			}
			g := b.acquire(t, "job", "a", time.Minute)
			require.Equal(t, store.Token(101), g.Token)
			require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", g.Token), "an acquired token is issued")
			require.Equal(t, int64(101), b.recorded(t, "r"))

			err := b.fencer.FenceForeign(ctx, b.pool, "r", math.MaxInt64)
			require.Equal(t, "42501", pgkit.Code(err), "the run-time role may not fence foreign tokens: %v", err)
			require.ErrorContains(t, err, "permission denied")
			require.NoError(t, b.fencer.FenceForeign(ctx, b.owner, "foreign", 1<<40), "the owner may")
			requireFenced(t, b.fencer.FenceForeign(ctx, b.owner, "foreign", 1<<39), "foreign", 1<<39, 1<<40)
		})
	}
}

// recorded returns the token resource's fence holds, read as the owner.
func (b *testBundle) recorded(t *testing.T, resource string) int64 {
	t.Helper()
	obj, err := b.cfg.Objects()
	require.NoError(t, err)
	var tok int64
	require.NoError(t, b.owner.QueryRow(t.Context(),
		"SELECT token FROM "+pgx.Identifier{obj.Schema, obj.Fences}.Sanitize()+" WHERE resource = $1", resource).Scan(&tok))
	return tok
}

// TestReset repairs a poisoned fence as the owner, finds the reset
// recorded, and is refused to the run-time role.
func TestReset(t *testing.T) {
	t.Parallel()
	b := setup(t, pgx.QueryExecModeCacheStatement)
	ctx := t.Context()
	obj, err := b.cfg.Objects()
	require.NoError(t, err)
	require.NoError(t, b.fencer.FenceForeign(ctx, b.owner, "invoices", math.MaxInt64), "poisoned")
	g := b.acquire(t, "job", "a", time.Minute)
	requireFenced(t, b.fencer.Fence(ctx, b.pool, "invoices", g.Token), "invoices", g.Token, math.MaxInt64)

	_, err = b.fencer.Reset(ctx, b.pool, "invoices", 0, "repair")
	require.Equal(t, "42501", pgkit.Code(err), "the run-time role cannot reset: %v", err)
	require.Equal(t, int64(math.MaxInt64), b.recorded(t, "invoices"))

	old, err := b.fencer.Reset(ctx, b.owner, "invoices", 50, "poisoned by a test")
	require.NoError(t, err)
	require.Equal(t, store.Token(math.MaxInt64), old)
	require.Equal(t, int64(50), b.recorded(t, "invoices"))
	require.NoError(t, b.fencer.Fence(ctx, b.pool, "invoices", g.Token), "legitimate writers pass again")

	var (
		oldTok, newTok          int64
		reason, by, sessionRole string
		at                      time.Time
		ownerRole               string
	)
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT current_user").Scan(&ownerRole))
	require.NoError(t, b.owner.QueryRow(ctx,
		"SELECT old_token, new_token, reason, reset_by, session_role, reset_at FROM "+
			pgx.Identifier{obj.Schema, obj.FenceResets}.Sanitize()+" WHERE resource = 'invoices'",
	).Scan(&oldTok, &newTok, &reason, &by, &sessionRole, &at))
	require.Equal(t, int64(math.MaxInt64), oldTok)
	require.Equal(t, int64(50), newTok)
	require.Equal(t, "poisoned by a test", reason)
	require.Equal(t, ownerRole, by)
	require.Equal(t, ownerRole, sessionRole)
	require.WithinDuration(t, time.Now(), at, time.Minute)

	for name, tc := range map[string]struct {
		resource string
		tok      store.Token
		reason   string
		is       error
		contains string
	}{
		"NoFence":      {resource: "absent", tok: 1, reason: "r", contains: "has no fence"},
		"NotIssued":    {resource: "invoices", tok: g.Token + 1, reason: "r", is: fence.ErrNotIssued},
		"NoReason":     {resource: "invoices", tok: 1, reason: " ", is: store.ErrInvalid},
		"Negative":     {resource: "invoices", tok: -1, reason: "r", is: store.ErrInvalid},
		"EmptyName":    {resource: "", tok: 1, reason: "r", is: store.ErrInvalid},
		"ControlChars": {resource: "a\nb", tok: 1, reason: "r", is: store.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.fencer.Reset(ctx, b.owner, tc.resource, tc.tok, tc.reason)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			require.ErrorContains(t, err, tc.contains)
		})
	}
	require.Equal(t, int64(g.Token), b.recorded(t, "invoices"), "refused resets change nothing")
	_, err = pgfence.New(pgstore.Config{TablePrefix: "a$"})
	require.ErrorIs(t, err, store.ErrInvalid)
}
