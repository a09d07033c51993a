package pgfence_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// eventTimeout bounds every wait for an event.
const eventTimeout = 10 * time.Second

// testBundle is a fresh schema, a least-privilege role granted what
// pgstore.Config.GrantSQL prints plus a table of its own to write to, a
// store and a fencer working through that role, and the owner's pool for
// inspecting.
type testBundle struct {
	owner  *pgxpool.Pool
	pool   *pgxpool.Pool // the role's
	cfg    pgstore.Config
	store  *pgstore.Store
	fencer *pgfence.Fencer
	writes string // a table the role may INSERT into and SELECT from
}

func setup(t *testing.T, mode pgx.QueryExecMode) *testBundle {
	t.Helper()
	return setupConfig(t, mode, pgserver.PostgresConfig(t))
}

func setupConfig(t *testing.T, mode pgx.QueryExecMode, cfg pgstore.Config) *testBundle {
	t.Helper()
	owner := pgserver.PostgresPool(t, mode, "")
	role := pgserver.PostgresRole(t, owner)
	b := &testBundle{owner: owner, cfg: cfg}
	pgserver.PostgresSchema(t, owner, b.cfg)
	pgserver.PostgresGrant(t, owner, b.cfg, role)
	b.writes = pgx.Identifier{b.cfg.Schema, "writes"}.Sanitize()
	_, err := owner.Exec(t.Context(), "CREATE TABLE "+b.writes+" (token bigint NOT NULL, written_at timestamptz NOT NULL DEFAULT clock_timestamp())")
	require.NoError(t, err)
	_, err = owner.Exec(t.Context(), "GRANT SELECT, INSERT ON "+b.writes+" TO "+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	// The tests fence with small tokens of their own choosing; a fence
	// takes only tokens the sequence issued, so the first 100 count as
	// issued.
	obj, err := b.cfg.Objects()
	require.NoError(t, err)
	_, err = owner.Exec(t.Context(), "SELECT setval($1::regclass, 100)", pgx.Identifier{obj.Schema, obj.TokenSeq}.Sanitize())
	require.NoError(t, err)
	b.pool = pgserver.PostgresPool(t, mode, role)
	b.store, err = pgstore.New(b.pool, b.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.store.Close()) })
	b.fencer, err = pgfence.New(b.cfg)
	require.NoError(t, err)
	return b
}

func (b *testBundle) acquire(t *testing.T, name string, label string, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: testutil.Holder(t, label), TTL: ttl})
	require.NoError(t, err)
	return g
}

// begin starts a transaction on the role's pool, rolled back at the end of
// the test unless committed.
func (b *testBundle) begin(t *testing.T) pgx.Tx {
	t.Helper()
	tx, err := b.pool.Begin(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := tx.Rollback(context.Background()); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			t.Errorf("rollback: %v", err)
		}
	})
	return tx
}

func (b *testBundle) write(t *testing.T, tx pgx.Tx, tok store.Token) {
	t.Helper()
	_, err := tx.Exec(t.Context(), "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(tok))
	require.NoError(t, err)
}

func (b *testBundle) writtenTokens(t *testing.T) []int64 {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), "SELECT token FROM "+b.writes+" ORDER BY written_at")
	require.NoError(t, err)
	toks, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return toks
}

// backendPID returns the server process serving tx.
func backendPID(t *testing.T, tx pgx.Tx) uint32 {
	t.Helper()
	return tx.Conn().PgConn().PID()
}

// awaitBlockedBy waits until some session waits for a lock held by the
// backend pid.
func (b *testBundle) awaitBlockedBy(t *testing.T, pid uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := b.owner.QueryRow(t.Context(),
			"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))", int32(pid)).Scan(&n)
		return err == nil && n > 0
	}, eventTimeout, 5*time.Millisecond, "no session started waiting for backend %d", pid)
}

// runClient runs a client over the bundle's store until the test ends, and
// acquires "job" with it.
func (b *testBundle) runClient(t *testing.T, label string, ttl time.Duration) *tenure.Lease {
	t.Helper()
	c, err := tenure.New(b.store, tenure.Config{Label: label, TTL: ttl})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	l, err := c.Acquire(t.Context(), "job")
	require.NoError(t, err)
	return l
}

// checkStrict runs c's strict check in tx, which must pass, and returns the
// seq it advanced the chain to.
func (b *testBundle) checkStrict(t *testing.T, tx pgx.Tx, c store.ChainWrite) int64 {
	t.Helper()
	seq, err := b.fencer.CheckLeaseStrict(t.Context(), tx, c)
	require.NoError(t, err)
	return seq
}

// renewsAt renews g's tenure presenting seq, and reports whether the store
// renewed it.
func (b *testBundle) renewsAt(t *testing.T, g store.Grant, seq int64) bool {
	t.Helper()
	rs, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: seq, TTL: time.Minute}})
	require.NoError(t, err)
	return rs[0].Renewed
}

// testHighestTokenWins checks, under both query modes, that Fence through
// querier(b) accepts equal and greater tokens and refuses lesser ones.
func testHighestTokenWins(t *testing.T, querier func(t *testing.T, b *testBundle) pgfence.Querier) {
	t.Helper()
	for name, mode := range map[string]pgx.QueryExecMode{
		"CacheStatement": pgx.QueryExecModeCacheStatement,
		"SimpleProtocol": pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode)
			q := querier(t, b)
			ctx := t.Context()
			const res = "invoices"
			require.NoError(t, b.fencer.Fence(ctx, q, res, 5), "first token")
			require.NoError(t, b.fencer.Fence(ctx, q, res, 5), "equal token")
			require.NoError(t, b.fencer.Fence(ctx, q, res, 7), "greater token")
			requireFenced(t, b.fencer.Fence(ctx, q, res, 6), res, 6, 7)
			requireFenced(t, b.fencer.Fence(ctx, q, res, 1), res, 1, 7)
			require.NoError(t, b.fencer.Fence(ctx, q, "other", 1), "resources are independent")
		})
	}
}

// strictTxs is how a test runs strict checks in transactions: through pgx
// or through database/sql.
type strictTxs struct {
	// begin starts a transaction, rolled back at the end of the test unless
	// committed, and returns it with its commit.
	begin func(t *testing.T) (tx pgfence.Querier, commit func() error)
	// checkAlone runs c's strict check in a transaction of its own and
	// rolls that back.
	checkAlone func(ctx context.Context, c store.ChainWrite) error
}

// requireOneOfTwoClones checks that of two byte-identical clones of one
// tenure, the first to check and commit writes, and the second, waiting on
// the first's row lock, is refused.
func (b *testBundle) requireOneOfTwoClones(t *testing.T, txs strictTxs) {
	t.Helper()
	ctx := t.Context()
	g := b.acquire(t, "job", "a", time.Minute)
	first, second := newChain(g), newChain(g)

	tx, commit := txs.begin(t)
	seq, err := b.fencer.CheckLeaseStrict(ctx, tx, first)
	require.NoError(t, err)
	require.Equal(t, g.Seq+1, seq)
	_, err = tx.Exec(ctx, "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(g.Token))
	require.NoError(t, err)
	var pid int32
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))

	done := make(chan error, 1)
	go func() { done <- txs.checkAlone(ctx, second) }()
	b.awaitBlockedBy(t, uint32(pid))
	require.NoError(t, commit())

	err = receive(t, done, "the second clone's check")
	requireFenced(t, err, "lease:job", g.Token, g.Token)
	require.ErrorContains(t, err, "renewal chain")
	require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t))
}

// requireFenced checks that err matches store.ErrFenced with the given
// fields.
func requireFenced(t *testing.T, err error, resource string, offered, recorded store.Token) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrFenced)
	var fe *store.FencedError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, store.FencedError{Resource: resource, Offered: offered, Recorded: recorded}, *fe)
}

// chain is a store.ChainWrite made of plain fields: two chains with the
// same fields are byte-identical clones.
type chain struct {
	name   string
	holder store.Holder
	token  store.Token
	seq    int64
}

// strictErr drops the seq of a strict check, for tests about its error.
func strictErr(_ int64, err error) error { return err }

func newChain(g store.Grant) *chain {
	return &chain{name: g.Name, holder: g.Holder, token: g.Token, seq: g.Seq}
}

func (c *chain) Name() string         { return c.name }
func (c *chain) Holder() store.Holder { return c.holder }
func (c *chain) Token() store.Token   { return c.token }

func (c *chain) Seq() int64 { return c.seq }

// Commit and Abort do nothing: the tests read the seq a check returns.
func (c *chain) Commit(int64) {}
func (c *chain) Abort()       {}

func TestFence(t *testing.T) {
	t.Parallel()

	t.Run("HighestTokenWins", func(t *testing.T) {
		t.Parallel()
		testHighestTokenWins(t, func(_ *testing.T, b *testBundle) pgfence.Querier { return b.pool })
	})

	t.Run("RolledBackWriteLeavesFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", 3))

		tx := b.begin(t)
		require.NoError(t, b.fencer.Fence(ctx, tx, "r", 9))
		b.write(t, tx, 9)
		require.NoError(t, tx.Rollback(ctx))

		require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", 4), "the rolled-back token 9 was never recorded")
		require.Empty(t, b.writtenTokens(t))
	})

	t.Run("StaleWriteIsRefusedInItsTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", 8))

		tx := b.begin(t)
		err := b.fencer.Fence(ctx, tx, "r", 2)
		requireFenced(t, err, "r", 2, 8)
		_, err = tx.Exec(ctx, "INSERT INTO "+b.writes+" (token) VALUES (2)")
		require.Error(t, err, "the transaction is aborted after a refusal")
		require.Error(t, tx.Commit(ctx))
		require.Empty(t, b.writtenTokens(t))
	})

	t.Run("WritersCommitInTokenOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		old := b.begin(t)
		require.NoError(t, b.fencer.Fence(ctx, old, "r", 5))
		b.write(t, old, 5)

		done := make(chan error, 1)
		go func() {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				done <- err
				return
			}
			defer func() { _ = tx.Rollback(context.Background()) }() // After Commit this is a no-op.
			if err := b.fencer.Fence(ctx, tx, "r", 6); err != nil {
				done <- err
				return
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+b.writes+" (token) VALUES (6)"); err != nil {
				done <- err
				return
			}
			done <- tx.Commit(ctx)
		}()
		b.awaitBlockedBy(t, backendPID(t, old))
		require.NoError(t, old.Commit(ctx))
		require.NoError(t, receive(t, done, "the newer writer"))
		require.Equal(t, []int64{5, 6}, b.writtenTokens(t))
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		f, err := pgfence.New(pgstore.Config{})
		require.NoError(t, err)
		ctx := t.Context()
		for name, call := range map[string]func() error{
			"EmptyResource": func() error { return f.Fence(ctx, &pgxpool.Pool{}, "", 1) },
			"ZeroToken":     func() error { return f.Fence(ctx, &pgxpool.Pool{}, "r", 0) },
			"NegativeToken": func() error { return f.Fence(ctx, &pgxpool.Pool{}, "r", -1) },
			"NilQuerier":    func() error { return f.Fence(ctx, nil, "r", 1) },
			"LongResource":  func() error { return f.Fence(ctx, &pgxpool.Pool{}, string(make([]byte, store.MaxNameLen+1)), 1) },
			"BadUTF8":       func() error { return f.Fence(ctx, &pgxpool.Pool{}, "\xff", 1) },
			"CheckEmpty":    func() error { return f.CheckLease(ctx, &pgxpool.Pool{}, "", 1) },
			"CheckZero":     func() error { return f.CheckLease(ctx, &pgxpool.Pool{}, "l", 0) },
			"StrictNil":     func() error { return strictErr(f.CheckLeaseStrict(ctx, &pgxpool.Pool{}, nil)) },
			"StrictNoHolder": func() error {
				return strictErr(f.CheckLeaseStrict(ctx, &pgxpool.Pool{}, &chain{name: "l", token: 1, seq: 1}))
			},
			"StrictZeroSeq": func() error {
				return strictErr(f.CheckLeaseStrict(ctx, &pgxpool.Pool{}, &chain{name: "l", holder: store.Holder{Label: "a", Instance: "b"}, token: 1}))
			},
			"StrictTxNil": func() error { return f.StrictTx(ctx, nil, nil, nil) },
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				require.ErrorIs(t, call(), store.ErrInvalid)
			})
		}
		_, err = pgfence.New(pgstore.Config{TablePrefix: "a$"})
		require.ErrorIs(t, err, store.ErrInvalid)
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		f, err := pgfence.New(pgserver.PostgresConfig(t))
		require.NoError(t, err)
		err = f.Fence(t.Context(), owner, "r", 1)
		require.ErrorIs(t, err, store.ErrNotMigrated)
		require.ErrorContains(t, err, "tenure migrate")
		require.ErrorIs(t, f.CheckLease(t.Context(), owner, "l", 1), store.ErrNotMigrated)
	})

	t.Run("Unavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, b.fencer.Fence(ctx, b.pool, "r", 1), store.ErrUnavailable)
	})
}

func TestCheckLease(t *testing.T) {
	t.Parallel()

	t.Run("Held", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		g := b.acquire(t, "job", "a", time.Minute)
		tx := b.begin(t)
		require.NoError(t, b.fencer.CheckLease(t.Context(), tx, g.Name, g.Token))
		b.write(t, tx, g.Token)
		require.NoError(t, tx.Commit(t.Context()))
		require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t))
	})

	t.Run("FailsAfterTakeover", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		old := b.acquire(t, "job", "old", store.MinTTL)
		waitExpiry(old)
		next := b.acquire(t, "job", "next", time.Minute)

		err := b.fencer.CheckLease(ctx, b.pool, "job", old.Token)
		requireFenced(t, err, "lease:job", old.Token, next.Token)
		require.ErrorContains(t, err, "superseded")
		require.NoError(t, b.fencer.CheckLease(ctx, b.pool, "job", next.Token))
	})

	t.Run("FailsWhenNotHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()

		err := b.fencer.CheckLease(ctx, b.pool, "absent", 3)
		requireFenced(t, err, "lease:absent", 3, 0)
		require.ErrorContains(t, err, "absent")

		released := b.acquire(t, "released", "a", time.Minute)
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: released.Name, Holder: released.Holder, Token: released.Token}))
		err = b.fencer.CheckLease(ctx, b.pool, "released", released.Token)
		requireFenced(t, err, "lease:released", released.Token, released.Token)
		require.ErrorContains(t, err, "released")

		expired := b.acquire(t, "expired", "a", store.MinTTL)
		waitExpiry(expired)
		err = b.fencer.CheckLease(ctx, b.pool, "expired", expired.Token)
		requireFenced(t, err, "lease:expired", expired.Token, expired.Token)
		require.ErrorContains(t, err, "expired")
	})

	t.Run("TakeoverWaitsForCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		old := b.acquire(t, "job", "old", store.MinTTL)

		tx := b.begin(t)
		require.NoError(t, b.fencer.CheckLease(ctx, tx, "job", old.Token))
		b.write(t, tx, old.Token)

		type outcome struct {
			g   store.Grant
			err error
		}
		takeover := make(chan outcome, 1)
		go func() {
			g, err := b.store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "next"), TTL: time.Minute})
			takeover <- outcome{g, err}
		}()
		b.awaitBlockedBy(t, backendPID(t, tx))
		waitExpiry(old)
		select {
		case o := <-takeover:
			t.Fatalf("the takeover finished while the checked transaction was open: %+v", o)
		default:
		}
		require.NoError(t, tx.Commit(ctx))

		o := receive(t, takeover, "the takeover")
		require.NoError(t, o.err)
		require.Greater(t, o.g.Token, old.Token)
		var writtenAt time.Time
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT written_at FROM "+b.writes).Scan(&writtenAt))
		r, err := b.store.Get(ctx, "job")
		require.NoError(t, err)
		require.True(t, r.AcquiredAt.After(writtenAt), "the new tenure (%s) began after the old holder's write (%s)", r.AcquiredAt, writtenAt)
	})
}

func TestCheckLeaseStrict(t *testing.T) {
	t.Parallel()

	t.Run("AdvancesChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", time.Minute)
		tx := b.begin(t)
		seq := b.checkStrict(t, tx, newChain(g))
		require.Equal(t, g.Seq+1, seq)
		require.NoError(t, tx.Commit(ctx))

		require.False(t, b.renewsAt(t, g, g.Seq), "the old seq no longer renews")
		require.True(t, b.renewsAt(t, g, seq), "the new seq renews")
	})

	t.Run("OneOfTwoClones", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		b.requireOneOfTwoClones(t, strictTxs{
			begin: func(t *testing.T) (pgfence.Querier, func() error) {
				tx := b.begin(t)
				return tx, func() error { return tx.Commit(t.Context()) }
			},
			checkAlone: func(ctx context.Context, c store.ChainWrite) error {
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback(context.Background()) }() // The check is expected to fail; the rollback only ends the transaction.
				return strictErr(b.fencer.CheckLeaseStrict(ctx, tx, c))
			},
		})
	})

	t.Run("RacingClonesOneWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", time.Minute)
		const clones = 6
		errs := make(chan error, clones)
		var wg sync.WaitGroup
		for range clones {
			c := newChain(g)
			wg.Go(func() {
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				defer func() { _ = tx.Rollback(context.Background()) }() // After Commit this is a no-op.
				if _, err := b.fencer.CheckLeaseStrict(ctx, tx, c); err != nil {
					errs <- err
					return
				}
				if _, err := tx.Exec(ctx, "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(c.Token())); err != nil {
					errs <- err
					return
				}
				errs <- tx.Commit(ctx)
			})
		}
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			if err == nil {
				wins++
				continue
			}
			require.ErrorIs(t, err, store.ErrFenced)
		}
		require.Equal(t, 1, wins)
		require.Len(t, b.writtenTokens(t), 1)
	})

	t.Run("RollbackLeavesTheChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", time.Minute)
		tx := b.begin(t)
		b.checkStrict(t, tx, newChain(g))
		require.NoError(t, tx.Rollback(ctx))

		require.True(t, b.renewsAt(t, g, g.Seq), "a rolled-back check advanced nothing")
	})

	t.Run("OtherHolderOrTokenRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		ctx := t.Context()
		first := b.acquire(t, "job", "a", time.Minute)
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: first.Name, Holder: first.Holder, Token: first.Token}))
		g := b.acquire(t, "job", "a", time.Minute)

		other := newChain(g)
		other.holder = testutil.Holder(t, "a")
		_, err := b.fencer.CheckLeaseStrict(ctx, b.pool, other)
		requireFenced(t, err, "lease:job", g.Token, g.Token)

		stale := newChain(g)
		stale.token = g.Token - 1
		_, err = b.fencer.CheckLeaseStrict(ctx, b.pool, stale)
		requireFenced(t, err, "lease:job", g.Token-1, g.Token)

		r, err := b.store.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, g.Seq, r.Seq, "refused checks leave the chain alone")
	})
}

// TestQuotedNames runs every function on a schema and prefix that need
// quoting everywhere, including inside the function bodies.
func TestQuotedNames(t *testing.T) {
	t.Parallel()
	b := setupConfig(t, pgx.QueryExecModeCacheStatement, pgserver.PostgresWeirdConfig(t))
	ctx := t.Context()
	require.NoError(t, b.fencer.Fence(ctx, b.pool, "r", 2))
	requireFenced(t, b.fencer.Fence(ctx, b.pool, "r", 1), "r", 1, 2)
	g := b.acquire(t, "job", "a", time.Minute)
	require.NoError(t, b.fencer.CheckLease(ctx, b.pool, "job", g.Token))
	seq, err := b.fencer.CheckLeaseStrict(ctx, b.pool, newChain(g))
	require.NoError(t, err)
	require.Equal(t, g.Seq+1, seq)
	requireFenced(t, b.fencer.CheckLease(ctx, b.pool, "absent", 1), "lease:absent", 1, 0)
}

// TestPlainSQL calls the functions the way psql or another language would:
// literal SQL, no Go helpers, and checks what the server says.
func TestPlainSQL(t *testing.T) {
	t.Parallel()
	b := setup(t, pgx.QueryExecModeSimpleProtocol)
	ctx := t.Context()
	obj, err := b.cfg.Objects()
	require.NoError(t, err)
	fn := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	g := b.acquire(t, "job", "a", time.Minute)

	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.FenceFunc)+"('invoices', 5)")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.FenceFunc)+"('invoices', 3)")
	pgErr := requirePgError(t, err, "TF001")
	require.Equal(t, `tenure: fenced: resource 'invoices' already accepted token 5; token 3 is stale (its holder was superseded)`, pgErr.Message)
	require.Equal(t, "recorded=5 offered=3", pgErr.Detail)
	require.NotEmpty(t, pgErr.Hint)

	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.CheckLeaseFunc)+"('job', "+g.Token.String()+")")
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.CheckLeaseFunc)+"('job', "+(g.Token+1).String()+")")
	pgErr = requirePgError(t, err, "TF002")
	require.Contains(t, pgErr.Message, "lease 'job' is now at token")
	require.Contains(t, pgErr.Detail, "state=superseded")

	var seq int64
	strict := "SELECT " + fn(obj.CheckLeaseStrictFunc) + "('job', " + g.Token.String() + ", $1, $2, 1)"
	require.NoError(t, b.pool.QueryRow(ctx, strict, g.Holder.Label, g.Holder.Instance).Scan(&seq))
	require.Equal(t, int64(2), seq)
	_, err = b.pool.Exec(ctx, strict, g.Holder.Label, g.Holder.Instance)
	pgErr = requirePgError(t, err, "TF003")
	require.Contains(t, pgErr.Detail, "current_seq=2 offered_seq=1")

	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.FenceFunc)+"(NULL, 1)")
	requirePgError(t, err, "22004")
	_, err = b.pool.Exec(ctx, "SELECT "+fn(obj.FenceFunc)+"('r', 0)")
	requirePgError(t, err, "22023")
}

// TestDefaultSchema runs the package-level functions, which use the default
// schema and prefix (public, tenure_); it migrates them if needed and uses
// names of its own.
func TestDefaultSchema(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	s, err := pgstore.New(owner, pgstore.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	require.NoError(t, s.Migrate(t.Context()))
	ctx := t.Context()
	name := testutil.UniqueName(t)

	g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.NoError(t, err)
	later, err := s.Acquire(ctx, store.AcquireParams{Name: name + "_later", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, pgfence.Fence(ctx, owner, name, later.Token))
	requireFenced(t, pgfence.Fence(ctx, owner, name, g.Token), name, g.Token, later.Token)
	require.NoError(t, pgfence.FenceForeign(ctx, owner, name+"_foreign", g.Token+1_000_000))
	require.NoError(t, pgfence.CheckLease(ctx, owner, name, g.Token))
	seq, err := pgfence.CheckLeaseStrict(ctx, owner, newChain(g))
	require.NoError(t, err)
	require.Equal(t, g.Seq+1, seq)
	require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: g.Holder, Token: g.Token}))
}

func requirePgError(t *testing.T, err error, code string) *pgconn.PgError {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, "SQLSTATE of %v", err)
	return pgErr
}

// waitExpiry waits until a lease granted with g.Remaining has expired by
// the store's clock: passing the TTL is the event itself.
func waitExpiry(g store.Grant) {
	time.Sleep(g.Remaining + 50*time.Millisecond)
}

// renewParams returns the params that renew the tenure g for ttl.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Receive(t, ch, what, eventTimeout)
}

// TestStrictTx runs strict writes through a real client: they interleave
// with its renewals without ever being taken for a clone's, and a
// rolled-back write costs nothing.
func TestStrictTx(t *testing.T) {
	t.Parallel()
	b := setup(t, pgx.QueryExecModeCacheStatement)
	ctx := t.Context()
	const ttl = 2 * time.Second
	l := b.runClient(t, "strict", ttl)

	write := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(l.Token()))
		return err
	}
	// Write back to back for two TTLs: several renewals meet the writes'
	// row locks and find the chain moved on by the holder's own commits.
	n := 0
	for start := time.Now(); time.Since(start) < 2*ttl; n++ {
		require.NoError(t, b.fencer.StrictTx(ctx, b.pool, l, write), "write %d", n)
	}
	require.NoError(t, l.Err(), "the holder's own writes were taken for a clone's")
	require.Len(t, b.writtenTokens(t), n)

	errAbandoned := errors.New("abandoned")
	err := b.fencer.StrictTx(ctx, b.pool, l, func(context.Context, pgx.Tx) error { return errAbandoned })
	require.ErrorIs(t, err, errAbandoned)
	require.NoError(t, b.fencer.StrictTx(ctx, b.pool, l, write), "a rolled-back write costs nothing")
	rec, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, rec.Seq, l.Seq(), "the client is in step with the chain")

	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, b.fencer.StrictTx(ctx, b.pool, l, write), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.writtenTokens(t), n+1)
}
