package pgadvisory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/pgadvisory"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// eventTimeout bounds every wait for an event.
const eventTimeout = 10 * time.Second

// testBundle is a unique key, two sessions a and b, and a pool for
// looking at the server from outside.
type testBundle struct {
	key   string
	a, b  *pgx.Conn
	admin *pgxpool.Pool
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{
		key:   "pgadvisory test: " + testutil.UniqueName(t),
		a:     connect(t, pgx.QueryExecModeCacheStatement),
		b:     connect(t, pgx.QueryExecModeCacheStatement),
		admin: adminPool(t),
	}
}

// connect opens one session, closed when the test ends.
func connect(t *testing.T, mode pgx.QueryExecMode) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(testutil.PostgresURL())
	require.NoError(t, err)
	cfg.DefaultQueryExecMode = mode
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	testutil.NeedServer(t, "PostgreSQL at "+testutil.PostgresURL(), err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) }) // Closing twice is harmless; some tests close it first.
	return conn
}

func adminPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), testutil.PostgresURL())
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(t, "PostgreSQL at "+testutil.PostgresURL(), pool.Ping(ctx))
	return pool
}

func pid(c *pgx.Conn) uint32 { return c.PgConn().PID() }

// requireHeld checks that err is a HeldError for key naming pid.
func requireHeld(t *testing.T, err error, key string, pid uint32) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrHeld)
	var held *pgadvisory.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, pgadvisory.HeldError{Key: key, ID: pgadvisory.ID(key), PID: pid}, *held)
}

// holders returns the backends holding the lock of key.
func (b *testBundle) holders(t *testing.T) []uint32 {
	t.Helper()
	id := pgadvisory.ID(b.key)
	rows, err := b.admin.Query(t.Context(), `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid
		ORDER BY pid`, id)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	out := make([]uint32, len(pids))
	for i, p := range pids {
		out[i] = uint32(p)
	}
	return out
}

// tryLock takes the lock of key on c, which must be free.
func (b *testBundle) tryLock(t *testing.T, c *pgx.Conn) *pgadvisory.Guard {
	t.Helper()
	g, err := pgadvisory.TryLock(t.Context(), c, b.key)
	require.NoError(t, err)
	return g
}

// requireFree checks that c can take the lock of key, and gives it back.
func (b *testBundle) requireFree(t *testing.T, c *pgx.Conn, msgAndArgs ...any) {
	t.Helper()
	g, err := pgadvisory.TryLock(t.Context(), c, b.key)
	require.NoError(t, err, msgAndArgs...)
	require.NoError(t, g.Unlock(t.Context()))
}

// requireRefused checks that TryLock on c is refused with a HeldError
// naming holder, and returns that error.
func (b *testBundle) requireRefused(t *testing.T, c, holder *pgx.Conn) error {
	t.Helper()
	_, err := pgadvisory.TryLock(t.Context(), c, b.key)
	requireHeld(t, err, b.key, pid(holder))
	return err
}

// requireHeldOnlyBy checks that c's backend is the lock's only holder.
func (b *testBundle) requireHeldOnlyBy(t *testing.T, c *pgx.Conn) {
	t.Helper()
	require.Equal(t, []uint32{pid(c)}, b.holders(t))
}

// awaitBlockedBy waits until backend waiter waits for a lock held by
// backend holder.
func (b *testBundle) awaitBlockedBy(t *testing.T, waiter, holder uint32) {
	t.Helper()
	require.Eventually(t, func() bool {
		var blocked bool
		err := b.admin.QueryRow(t.Context(), "SELECT $2::int = ANY (pg_blocking_pids($1::int))", int32(waiter), int32(holder)).Scan(&blocked)
		return err == nil && blocked
	}, eventTimeout, 5*time.Millisecond, "backend %d never waited for backend %d", waiter, holder)
}

func TestSessionLock(t *testing.T) {
	t.Parallel()

	t.Run("OneOfTwoSessions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)
		require.Equal(t, b.key, g.Key())
		require.Equal(t, pgadvisory.ID(b.key), g.ID())
		b.requireHeldOnlyBy(t, b.a)

		err := b.requireRefused(t, b.b, b.a)
		require.ErrorContains(t, err, "pg_terminate_backend")
		require.False(t, b.b.IsClosed(), "a refusal leaves the session alone")

		require.NoError(t, g.Unlock(ctx))
		require.Empty(t, b.holders(t))
		b.requireFree(t, b.b, "released on Unlock")
	})

	t.Run("SimpleProtocol", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		simple := connect(t, pgx.QueryExecModeSimpleProtocol)
		g := b.tryLock(t, simple)
		b.requireRefused(t, b.a, simple)
		require.NoError(t, g.Unlock(ctx))
		g, err := pgadvisory.Lock(ctx, simple, b.key)
		require.NoError(t, err)
		require.NoError(t, g.Unlock(ctx))
	})

	t.Run("UnlockTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)
		require.NoError(t, g.Unlock(ctx))
		err := g.Unlock(ctx)
		require.ErrorIs(t, err, store.ErrNotHeld)
		require.ErrorContains(t, err, "already unlocked")
	})

	t.Run("ReleasedWhenSessionDies", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)

		var terminated bool
		require.NoError(t, b.admin.QueryRow(ctx, "SELECT pg_terminate_backend($1::int)", int32(pid(b.a))).Scan(&terminated))
		require.True(t, terminated)
		require.Eventually(t, func() bool { return len(b.holders(t)) == 0 }, eventTimeout, 5*time.Millisecond,
			"the lock outlived its session")
		b.requireFree(t, b.b)

		err := g.Unlock(ctx)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.True(t, b.a.IsClosed(), "a session that cannot be told to unlock is closed")
	})

	t.Run("ReleasedBehindTheGuardsBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)
		_, err := b.a.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		require.NoError(t, err)
		err = g.Unlock(ctx)
		require.ErrorIs(t, err, store.ErrNotHeld)
		require.ErrorContains(t, err, "may have run unguarded")
		require.False(t, b.a.IsClosed())
	})

	t.Run("SessionCountsTwice", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g1 := b.tryLock(t, b.a)
		g2, err := pgadvisory.TryLock(ctx, b.a, b.key)
		require.NoError(t, err, "PostgreSQL lets a session lock a key it holds")
		require.NoError(t, g1.Unlock(ctx))
		b.requireRefused(t, b.b, b.a)
		require.NoError(t, g2.Unlock(ctx))
		b.requireFree(t, b.b)
	})

	t.Run("LockWaitsForUnlock", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)

		type outcome struct {
			g   *pgadvisory.Guard
			err error
		}
		done := make(chan outcome, 1)
		go func() {
			g, err := pgadvisory.Lock(ctx, b.b, b.key)
			done <- outcome{g, err}
		}()
		b.awaitBlockedBy(t, pid(b.b), pid(b.a))
		require.NoError(t, g.Unlock(ctx))
		o := receive(t, done, "the waiting Lock")
		require.NoError(t, o.err)
		b.requireHeldOnlyBy(t, b.b)
		require.NoError(t, o.g.Unlock(ctx))
	})

	t.Run("LockGivesUpWithContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.tryLock(t, b.a)

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := pgadvisory.Lock(ctx, b.b, b.key)
			done <- err
		}()
		b.awaitBlockedBy(t, pid(b.b), pid(b.a))
		cancel()
		err := receive(t, done, "the cancelled Lock")
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, b.b.IsClosed(), "a session that may hold the lock is closed")
		b.requireHeldOnlyBy(t, b.a)
		require.NoError(t, g.Unlock(t.Context()))
	})

	t.Run("LockTimeout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.tryLock(t, b.a)
		_, err := b.b.Exec(ctx, "SET lock_timeout = '20ms'")
		require.NoError(t, err)
		_, err = pgadvisory.Lock(ctx, b.b, b.key)
		requireHeld(t, err, b.key, 0)
		require.ErrorContains(t, err, "lock_timeout")
		require.False(t, b.b.IsClosed(), "a lock_timeout proves the lock was not taken")
		b.requireHeldOnlyBy(t, b.a)
		require.NoError(t, g.Unlock(ctx))
	})

	t.Run("DoneContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := pgadvisory.TryLock(ctx, b.a, b.key)
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "not attempted")
		_, err = pgadvisory.Lock(ctx, b.a, b.key)
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, b.a.IsClosed(), "nothing was sent")
		require.Empty(t, b.holders(t))
	})
}

func TestXactLock(t *testing.T) {
	t.Parallel()

	begin := func(t *testing.T, c *pgx.Conn) pgx.Tx {
		t.Helper()
		tx, err := c.Begin(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() {
			if err := tx.Rollback(context.Background()); err != nil && !errors.Is(err, pgx.ErrTxClosed) && !c.IsClosed() {
				t.Errorf("rollback: %v", err)
			}
		})
		return tx
	}

	t.Run("ReleasedAtCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx := begin(t, b.a)
		require.NoError(t, pgadvisory.XactLock(ctx, tx, b.key))

		b.requireRefused(t, b.b, b.a)
		other := begin(t, b.b)
		requireHeld(t, pgadvisory.TryXactLock(ctx, other, b.key), b.key, pid(b.a))
		require.NoError(t, other.Rollback(ctx))

		require.NoError(t, tx.Commit(ctx))
		require.Empty(t, b.holders(t))
		b.requireFree(t, b.b, "released at commit")
	})

	t.Run("ReleasedAtRollback", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx := begin(t, b.a)
		require.NoError(t, pgadvisory.TryXactLock(ctx, tx, b.key))
		b.requireHeldOnlyBy(t, b.a)
		require.NoError(t, tx.Rollback(ctx))
		require.Empty(t, b.holders(t))
	})

	t.Run("WaitsForCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx := begin(t, b.a)
		require.NoError(t, pgadvisory.XactLock(ctx, tx, b.key))
		other := begin(t, b.b)
		done := make(chan error, 1)
		go func() { done <- pgadvisory.XactLock(ctx, other, b.key) }()
		b.awaitBlockedBy(t, pid(b.b), pid(b.a))
		require.NoError(t, tx.Commit(ctx))
		require.NoError(t, receive(t, done, "the waiting XactLock"))
		b.requireHeldOnlyBy(t, b.b)
		require.NoError(t, other.Commit(ctx))
		require.Empty(t, b.holders(t))
	})

	t.Run("DDLInTheSameTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		table := pgx.Identifier{testutil.UniqueName(t)}.Sanitize()
		t.Cleanup(func() { _, _ = b.admin.Exec(context.Background(), "DROP TABLE IF EXISTS "+table) }) // Best effort: the table is unique to this test.
		migrate := func(c *pgx.Conn) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(context.Background()) }() // After Commit this is a no-op.
			if err := pgadvisory.XactLock(ctx, tx, b.key); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (id int)"); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
		done := make(chan error, 2)
		for _, c := range []*pgx.Conn{b.a, b.b} {
			go func() { done <- migrate(c) }()
		}
		require.NoError(t, receive(t, done, "the first migration"))
		require.NoError(t, receive(t, done, "the second migration"))
		var n int
		require.NoError(t, b.admin.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		require.Zero(t, n)
	})

	t.Run("FailedTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		tx := begin(t, b.a)
		_, err := tx.Exec(ctx, "SELECT 1/0")
		require.Error(t, err)
		err = pgadvisory.XactLock(ctx, tx, b.key)
		require.Error(t, err)
		require.ErrorContains(t, err, "roll it back")
		require.Empty(t, b.holders(t))
	})
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	withConn := func(call func(ctx context.Context, c *pgx.Conn) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			c := connect(t, pgx.QueryExecModeCacheStatement)
			err := call(t.Context(), c)
			require.False(t, c.IsClosed(), "bad input leaves the session alone")
			return err
		}
	}
	withTx := func(call func(ctx context.Context, tx pgx.Tx) error) func(t *testing.T) error {
		return func(t *testing.T) error {
			c := connect(t, pgx.QueryExecModeCacheStatement)
			tx, err := c.Begin(t.Context())
			require.NoError(t, err)
			err = call(t.Context(), tx)
			var one int
			require.NoError(t, tx.QueryRow(t.Context(), "SELECT 1").Scan(&one), "bad input leaves the transaction alone")
			require.NoError(t, tx.Rollback(t.Context()))
			return err
		}
	}
	for name, call := range map[string]func(t *testing.T) error{
		"NilConn": func(t *testing.T) error {
			_, err := pgadvisory.TryLock(t.Context(), nil, "k")
			return err
		},
		"NilConnLock": func(t *testing.T) error {
			_, err := pgadvisory.Lock(t.Context(), nil, "k")
			return err
		},
		"NilTx":     func(t *testing.T) error { return pgadvisory.TryXactLock(t.Context(), nil, "k") },
		"NilTxLock": func(t *testing.T) error { return pgadvisory.XactLock(t.Context(), nil, "k") },
		"EmptyKey": withConn(func(ctx context.Context, c *pgx.Conn) error {
			_, err := pgadvisory.TryLock(ctx, c, "")
			return err
		}),
		"EmptyKeyLock": withConn(func(ctx context.Context, c *pgx.Conn) error {
			_, err := pgadvisory.Lock(ctx, c, "")
			return err
		}),
		"LongKey": withConn(func(ctx context.Context, c *pgx.Conn) error {
			_, err := pgadvisory.TryLock(ctx, c, strings.Repeat("k", pgadvisory.MaxKeyLen+1))
			return err
		}),
		"EmptyKeyXact": withTx(func(ctx context.Context, tx pgx.Tx) error { return pgadvisory.XactLock(ctx, tx, "") }),
		"BadUTF8Xact":  withTx(func(ctx context.Context, tx pgx.Tx) error { return pgadvisory.TryXactLock(ctx, tx, "\xff") }),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := call(t)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.True(t, strings.HasPrefix(err.Error(), "pgadvisory: "), err.Error())
		})
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	// The first 16 hex digits of `printf %s KEY | sha256sum`.
	for _, golden := range []struct {
		key string
		id  uint64
	}{
		{"hello", 0x2cf24dba5fb0a30e},
		{"billing: schema migrations", 0x7c19fc5bb6213ae8},
		{"x", 0x2d711642b726b044},
	} {
		require.Equal(t, int64(golden.id), pgadvisory.ID(golden.key), "key %q", golden.key)
	}

	// The SQL expression in the package documentation computes the same
	// ids, negative ones and non-ASCII keys included.
	admin := adminPool(t)
	keys := []string{"hello", "billing: schema migrations", "ключ", "🔒 lock", "x", "a'b\"c;--"}
	sawNegative := false
	for _, key := range keys {
		var id int64
		err := admin.QueryRow(t.Context(),
			`SELECT ('x' || left(encode(sha256(convert_to($1::text, 'UTF8')), 'hex'), 16))::bit(64)::bigint`, key).Scan(&id)
		require.NoError(t, err)
		require.Equal(t, pgadvisory.ID(key), id, "key %q", key)
		sawNegative = sawNegative || id < 0
	}
	require.True(t, sawNegative, "the keys include one whose id is negative")
}

// receive waits for one value from ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Receive(t, ch, what, eventTimeout)
}
