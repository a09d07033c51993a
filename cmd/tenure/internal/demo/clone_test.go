package demo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// TestChargeStrict checks the clone scene's strict check directly: a
// charge at the tenure's seq passes and advances the lease row's seq by
// one; a charge after another copy moved the chain on is refused and
// writes nothing.
func TestChargeStrict(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "strict.db"), sqlitestore.Config{})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, createLedger(ctx, st.DB()))
	client, err := tenure.New(st, tenure.Config{Label: "strict", TTL: 30 * time.Second})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx) }()
	defer func() { stop(); <-ran }()
	l, err := client.Acquire(ctx, leaseName)
	require.NoError(t, err)

	seq, err := chargeStrict(ctx, st.DB(), 1, l)
	require.NoError(t, err)
	rec, err := st.Get(ctx, leaseName)
	require.NoError(t, err)
	require.Equal(t, seq+1, rec.Seq, "the strict check advances the chain")
	n, err := charges(ctx, st.DB())
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// Another copy of the tenure writes: the row's seq moves on.
	_, err = st.DB().ExecContext(ctx, `UPDATE tenure_leases SET seq = seq + 1 WHERE name = ?`, leaseName)
	require.NoError(t, err)
	_, err = chargeStrict(ctx, st.DB(), 2, l)
	require.ErrorIs(t, err, errChainMoved)
	require.ErrorIs(t, err, store.ErrFenced)
	n, err = charges(ctx, st.DB())
	require.NoError(t, err)
	require.Equal(t, 1, n, "a refused charge writes nothing")
}
