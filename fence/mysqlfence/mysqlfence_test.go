package mysqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/fence/mysqlfence"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

func TestMain(m *testing.M) { testutil.VerifyTestMain(m) }

// eventTimeout bounds every wait for an event.
const eventTimeout = 10 * time.Second

// testBundle is a fresh prefix, an account granted what
// mysqlstore.Config.GrantSQL prints plus a table of its own to write to, a
// store and a fencer working through that account, and the owner's handle
// for inspecting.
type testBundle struct {
	owner  *sql.DB
	db     *sql.DB // the account's
	cfg    mysqlstore.Config
	store  *mysqlstore.Store
	fencer *mysqlfence.Fencer
	writes string // a table the account may INSERT into and SELECT from
}

// issuedInTests is the counter every test starts from.
const issuedInTests = 100

func setup(t *testing.T) *testBundle {
	t.Helper()
	return setupConfig(t, mysqlserver.MySQLConfig(t))
}

func setupConfig(t *testing.T, cfg mysqlstore.Config) *testBundle {
	t.Helper()
	owner := mysqlserver.MySQLDB(t, "")
	account := mysqlserver.MySQLAccount(t, owner)
	b := &testBundle{owner: owner, cfg: cfg}
	mysqlserver.MySQLSchema(t, owner, cfg)
	mysqlserver.MySQLGrant(t, owner, cfg, account)
	// The fence accepts only tokens the counter handed out: tests that
	// fence made-up tokens count them as issued (up to issuedInTests).
	objs, err := cfg.Objects()
	require.NoError(t, err)
	_, err = owner.ExecContext(t.Context(), "UPDATE "+mysqlstore.Quote(cfg.Database, objs.Tokens)+" SET value = GREATEST(value, ?) WHERE id = 1", issuedInTests)
	require.NoError(t, err)
	b.writes = mysqlstore.Quote(cfg.Database, testutil.UniqueName(t)+"_writes")
	_, err = owner.ExecContext(t.Context(), "CREATE TABLE "+b.writes+
		" (id BIGINT AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL) ENGINE = InnoDB")
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := owner.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+b.writes)
		require.NoError(t, err)
	})
	_, err = owner.ExecContext(t.Context(), "GRANT SELECT, INSERT ON "+b.writes+" TO '"+account+"'@'%'")
	require.NoError(t, err)
	b.db = mysqlserver.MySQLDB(t, account)
	b.store, err = mysqlstore.New(b.db, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.store.Close()) })
	b.fencer, err = mysqlfence.New(cfg)
	require.NoError(t, err)
	return b
}

func (b *testBundle) acquire(t *testing.T, name, label string, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: testutil.Holder(t, label), TTL: ttl})
	require.NoError(t, err)
	return g
}

// session is a transaction on a connection of its own, whose server
// thread id is known, rolled back at the end of the test unless committed.
type session struct {
	tx *sql.Tx
	id int64
}

func (b *testBundle) begin(t *testing.T) session {
	t.Helper()
	conn, err := b.db.Conn(t.Context())
	require.NoError(t, err)
	var s session
	require.NoError(t, conn.QueryRowContext(t.Context(), "SELECT CONNECTION_ID()").Scan(&s.id))
	s.tx, err = conn.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := s.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Errorf("rollback: %v", err)
		}
		require.NoError(t, conn.Close())
	})
	return s
}

func (b *testBundle) write(t *testing.T, tx *sql.Tx, tok store.Token) {
	t.Helper()
	_, err := tx.ExecContext(t.Context(), "INSERT INTO "+b.writes+" (token) VALUES (?)", int64(tok))
	require.NoError(t, err)
}

func (b *testBundle) writtenTokens(t *testing.T) []int64 {
	t.Helper()
	rows, err := b.db.QueryContext(t.Context(), "SELECT token FROM "+b.writes+" ORDER BY id")
	require.NoError(t, err)
	toks := []int64{}
	for rows.Next() {
		var tok int64
		require.NoError(t, rows.Scan(&tok))
		toks = append(toks, tok)
	}
	require.NoError(t, rows.Err())
	return toks
}

// awaitLockWait waits until the server thread id has been in one
// statement for lockWaitEvidence: the statements under test finish in
// well under a millisecond unless they wait for a row lock. (MariaDB lists
// a transaction in INNODB_TRX only once it has a lock, so a first
// statement waiting for its first lock is not there.)
func (b *testBundle) awaitLockWait(t *testing.T, id int64) {
	t.Helper()
	b.awaitWaiting(t, "ID = ?", id)
}

// lockWaitEvidence is how long a statement must have been running to be
// taken for one waiting for a lock.
const lockWaitEvidence = 200 * time.Millisecond

// awaitWaiting waits until a server thread matching the PROCESSLIST
// condition where has been in one statement for lockWaitEvidence.
func (b *testBundle) awaitWaiting(t *testing.T, where string, args ...any) {
	t.Helper()
	args = append(args, lockWaitEvidence.Milliseconds())
	require.Eventually(t, func() bool {
		var n int
		err := b.owner.QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE "+where+" AND INFO IS NOT NULL AND TIME_MS >= ?", args...).Scan(&n)
		return err == nil && n > 0
	}, eventTimeout, 5*time.Millisecond, "no server thread where %s (%v) waited in a statement", where, args)
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

func newChain(g store.Grant) *chain {
	return &chain{name: g.Name, holder: g.Holder, token: g.Token, seq: g.Seq}
}

func (c *chain) Name() string         { return c.name }
func (c *chain) Holder() store.Holder { return c.holder }
func (c *chain) Token() store.Token   { return c.token }
func (c *chain) Seq() int64           { return c.seq }

// Commit and Abort do nothing: the tests read the seq a check returns.
func (c *chain) Commit(int64) {}
func (c *chain) Abort()       {}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Receive(t, ch, what, eventTimeout)
}

func TestFence(t *testing.T) {
	t.Parallel()

	t.Run("HighestTokenWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		const res = "invoices"
		require.NoError(t, b.fencer.Fence(ctx, b.db, res, 5), "first token")
		require.NoError(t, b.fencer.Fence(ctx, b.db, res, 5), "equal token")
		require.NoError(t, b.fencer.Fence(ctx, b.db, res, 7), "greater token")
		requireFenced(t, b.fencer.Fence(ctx, b.db, res, 6), res, 6, 7)
		requireFenced(t, b.fencer.Fence(ctx, b.db, res, 1), res, 1, 7)
		require.NoError(t, b.fencer.Fence(ctx, b.db, "other", 1), "resources are independent")
	})

	t.Run("NeverIssuedTokenIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		require.NoError(t, b.fencer.Fence(ctx, b.db, "invoices", 5))
		for _, tok := range []store.Token{issuedInTests + 1, 1<<63 - 1} {
			err := b.fencer.Fence(ctx, b.db, "invoices", tok)
			require.ErrorIs(t, err, fence.ErrNotIssued, "token %d", tok)
			require.ErrorIs(t, err, store.ErrInvalid)
			require.NotErrorIs(t, err, store.ErrFenced, "a forged token is not a superseded holder")
		}
		require.NoError(t, b.fencer.Fence(ctx, b.db, "invoices", 6), "the refusals recorded nothing")
		g := b.acquire(t, "job", "holder", time.Minute)
		require.Greater(t, g.Token, store.Token(issuedInTests))
		require.NoError(t, b.fencer.Fence(ctx, b.db, "invoices", g.Token), "an issued token is accepted")
	})

	t.Run("RolledBackWriteLeavesFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := b.begin(t)
		require.NoError(t, b.fencer.Fence(t.Context(), s.tx, "invoices", 9))
		require.NoError(t, s.tx.Rollback())
		require.NoError(t, b.fencer.Fence(t.Context(), b.db, "invoices", 3), "the rolled-back 9 was never recorded")
	})

	// Two writers race for one resource: the one with the greater token
	// checks first and holds the fence row; the stale one waits for its
	// commit and is then refused in its own transaction, writing nothing.
	t.Run("TwoWritersRacing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		old := b.acquire(t, "job", "old", time.Minute)
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: old.Name, Holder: old.Holder, Token: old.Token}))
		cur := b.acquire(t, "job", "new", time.Minute)
		require.Greater(t, cur.Token, old.Token)

		newer, stale := b.begin(t), b.begin(t)
		require.NoError(t, b.fencer.Fence(ctx, newer.tx, "invoices", cur.Token))
		b.write(t, newer.tx, cur.Token)
		done := make(chan error, 1)
		go func() {
			if err := b.fencer.Fence(ctx, stale.tx, "invoices", old.Token); err != nil {
				done <- err
				return
			}
			_, err := stale.tx.ExecContext(ctx, "INSERT INTO "+b.writes+" (token) VALUES (?)", int64(old.Token))
			done <- errors.Join(err, stale.tx.Commit())
		}()
		b.awaitLockWait(t, stale.id)
		require.NoError(t, newer.tx.Commit())
		requireFenced(t, receive(t, done, "the stale writer's fence"), "invoices", old.Token, cur.Token)
		require.Equal(t, []int64{int64(cur.Token)}, b.writtenTokens(t))
	})

	// MySQL keeps the transaction open after a refusal, with what it wrote
	// before the check: the caller must roll it back.
	t.Run("RefusalLeavesTheTransactionOpen", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, b.fencer.Fence(t.Context(), b.db, "invoices", 5))
		s := b.begin(t)
		b.write(t, s.tx, 4)
		requireFenced(t, b.fencer.Fence(t.Context(), s.tx, "invoices", 4), "invoices", 4, 5)
		var n int
		require.NoError(t, s.tx.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+b.writes).Scan(&n))
		require.Equal(t, 1, n, "the write before the check is still in the open transaction")
		require.NoError(t, s.tx.Rollback())
		require.Empty(t, b.writtenTokens(t))
	})

	t.Run("PlainSQLRaisesTF001", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		obj, err := b.cfg.Objects()
		require.NoError(t, err)
		call := "CALL " + obj.Ident(obj.FenceProc) + "(?, ?)"
		_, err = b.db.ExecContext(t.Context(), call, "r", 4)
		require.NoError(t, err)
		_, err = b.db.ExecContext(t.Context(), call, "r", 3)
		require.Equal(t, "TF001", mysqlstore.SQLState(err), "any client sees the distinct SQLSTATE: %v", err)
		require.ErrorContains(t, err, "recorded=4 offered=3")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		require.ErrorIs(t, b.fencer.Fence(ctx, nil, "r", 1), store.ErrInvalid)
		require.ErrorIs(t, b.fencer.Fence(ctx, b.db, "", 1), store.ErrInvalid)
		require.ErrorIs(t, b.fencer.Fence(ctx, b.db, "r", 0), store.ErrInvalid)
		require.ErrorIs(t, b.fencer.CheckLease(ctx, b.db, "r", -1), store.ErrInvalid)
		_, err := b.fencer.CheckLeaseStrict(ctx, b.db, nil)
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = b.fencer.CheckLeaseStrict(ctx, b.db, &chain{name: "r", token: 1, seq: 1})
		require.ErrorIs(t, err, store.ErrInvalid, "holder is empty")
		_, err = mysqlfence.New(mysqlstore.Config{TablePrefix: "a\nb"})
		require.ErrorIs(t, err, store.ErrInvalid)
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		owner := mysqlserver.MySQLDB(t, "")
		f, err := mysqlfence.New(mysqlserver.MySQLConfig(t))
		require.NoError(t, err)
		require.ErrorIs(t, f.Fence(t.Context(), owner, "r", 1), store.ErrNotMigrated)
	})

	t.Run("Unavailable", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, b.fencer.Fence(ctx, b.db, "r", 1), store.ErrUnavailable)
	})
}

func TestCheckLease(t *testing.T) {
	t.Parallel()

	t.Run("Held", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.acquire(t, "job", "a", time.Minute)
		s := b.begin(t)
		require.NoError(t, b.fencer.CheckLease(t.Context(), s.tx, "job", g.Token))
		b.write(t, s.tx, g.Token)
		require.NoError(t, s.tx.Commit())
		require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t))
	})

	t.Run("FailsWhenNotHeld", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		err := b.fencer.CheckLease(ctx, b.db, "job", 1)
		requireFenced(t, err, "lease:job", 1, 0)
		require.ErrorContains(t, err, "absent")

		g := b.acquire(t, "job", "a", time.Minute)
		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
		err = b.fencer.CheckLease(ctx, b.db, "job", g.Token)
		requireFenced(t, err, "lease:job", g.Token, g.Token)
		require.ErrorContains(t, err, "released")

		next := b.acquire(t, "job", "b", store.MinTTL)
		err = b.fencer.CheckLease(ctx, b.db, "job", g.Token)
		requireFenced(t, err, "lease:job", g.Token, next.Token)
		require.ErrorContains(t, err, "superseded")

		time.Sleep(next.Remaining + 20*time.Millisecond) // The store's expiry is the event itself.
		err = b.fencer.CheckLease(ctx, b.db, "job", next.Token)
		requireFenced(t, err, "lease:job", next.Token, next.Token)
		require.ErrorContains(t, err, "expired")
	})

	// The check judges expiry by the clock when it got the row lock, not
	// when its statement began: a lease that expires while the check waits
	// for a lock is refused. (NOW(6) inside the procedure would be the
	// CALL's start time and would let it pass.)
	t.Run("ExpiryJudgedAfterTheLockWait", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", store.MinTTL)
		blocker := b.begin(t)
		obj := b.store.Objects()
		ownerConn, err := b.owner.Conn(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, ownerConn.Close()) })
		lockTx, err := ownerConn.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = lockTx.ExecContext(ctx, "SELECT 1 FROM "+obj.Ident(obj.Leases)+" WHERE name = ? FOR UPDATE", "job")
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- b.fencer.CheckLease(ctx, blocker.tx, "job", g.Token) }()
		b.awaitLockWait(t, blocker.id)
		time.Sleep(g.Remaining + 20*time.Millisecond) // The store's expiry is the event itself.
		require.NoError(t, lockTx.Rollback())
		err = receive(t, done, "the check")
		requireFenced(t, err, "lease:job", g.Token, g.Token)
		require.ErrorContains(t, err, "expired")
	})

	t.Run("TakeoverWaitsForCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", store.MinTTL)
		s := b.begin(t)
		require.NoError(t, b.fencer.CheckLease(ctx, s.tx, "job", g.Token))
		b.write(t, s.tx, g.Token)
		time.Sleep(g.Remaining + 20*time.Millisecond) // The store's expiry is the event itself.

		taker, err := mysqlstore.New(b.db, b.cfg)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, taker.Close()) })
		done := make(chan store.Grant, 1)
		go func() {
			ng, err := taker.Acquire(ctx, store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "b"), TTL: time.Minute})
			if err != nil {
				t.Errorf("takeover: %v", err)
			}
			done <- ng
		}()
		b.awaitWaiting(t, "INFO LIKE CONCAT('%INSERT INTO%', ?, '%')", b.store.Objects().Leases)
		require.NoError(t, s.tx.Commit())
		ng := receive(t, done, "the takeover")
		require.Greater(t, ng.Token, g.Token)
		require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t), "the checked write committed before the takeover")
	})
}

func TestCheckLeaseStrict(t *testing.T) {
	t.Parallel()

	t.Run("AdvancesChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.acquire(t, "job", "a", time.Minute)
		s := b.begin(t)
		seq, err := b.fencer.CheckLeaseStrict(t.Context(), s.tx, newChain(g))
		require.NoError(t, err)
		require.Equal(t, g.Seq+1, seq)
		require.NoError(t, s.tx.Commit())
		rs, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.NoError(t, err)
		require.False(t, rs[0].Renewed, "the old seq no longer renews")
		rs, err = b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: seq, TTL: time.Minute}})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed, "the new seq does")
	})

	// Two byte-identical clones race: the first to check holds the row;
	// the second waits for its commit and is refused.
	t.Run("RacingClonesOneWins", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", time.Minute)
		first, second := b.begin(t), b.begin(t)
		_, err := b.fencer.CheckLeaseStrict(ctx, first.tx, newChain(g))
		require.NoError(t, err)
		b.write(t, first.tx, g.Token)
		done := make(chan error, 1)
		go func() {
			_, err := b.fencer.CheckLeaseStrict(ctx, second.tx, newChain(g))
			done <- err
		}()
		b.awaitLockWait(t, second.id)
		require.NoError(t, first.tx.Commit())
		err = receive(t, done, "the second clone's check")
		requireFenced(t, err, "lease:job", g.Token, g.Token)
		require.ErrorContains(t, err, "renewal chain is at seq 2, not 1")
		require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t))
	})

	t.Run("RollbackLeavesTheChain", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := b.acquire(t, "job", "a", time.Minute)
		s := b.begin(t)
		_, err := b.fencer.CheckLeaseStrict(t.Context(), s.tx, newChain(g))
		require.NoError(t, err)
		require.NoError(t, s.tx.Rollback())
		_, err = b.fencer.CheckLeaseStrict(t.Context(), b.db, newChain(g))
		require.NoError(t, err, "the rolled-back advance was never made")
	})

	t.Run("OtherHolderOrTokenRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.acquire(t, "job", "a", time.Minute)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: first.Name, Holder: first.Holder, Token: first.Token}))
		g := b.acquire(t, "job", "a", time.Minute)
		other := newChain(g)
		other.holder.Instance += "x"
		_, err := b.fencer.CheckLeaseStrict(t.Context(), b.db, other)
		requireFenced(t, err, "lease:job", g.Token, g.Token)
		stale := newChain(g)
		stale.token = first.Token
		_, err = b.fencer.CheckLeaseStrict(t.Context(), b.db, stale)
		requireFenced(t, err, "lease:job", first.Token, g.Token)
		require.ErrorContains(t, err, "superseded")
	})
}

func TestQuotedNames(t *testing.T) {
	t.Parallel()
	b := setupConfig(t, mysqlserver.MySQLWeirdConfig(t))
	g := b.acquire(t, "job", "a", time.Minute)
	require.NoError(t, b.fencer.Fence(t.Context(), b.db, "r", g.Token))
	require.NoError(t, b.fencer.CheckLease(t.Context(), b.db, "job", g.Token))
	seq, err := b.fencer.CheckLeaseStrict(t.Context(), b.db, newChain(g))
	require.NoError(t, err)
	require.Equal(t, g.Seq+1, seq)
}

func TestStrictTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const ttl = 3 * time.Second
	c, err := tenure.New(b.store, tenure.Config{Label: "strict", TTL: ttl})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- c.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-ran) })
	l, err := c.Acquire(ctx, "job")
	require.NoError(t, err)

	write := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+b.writes+" (token) VALUES (?)", int64(l.Token()))
		return err
	}
	// Write back to back for two TTLs: several renewals meet the writes'
	// row locks and find the chain moved on by the holder's own commits.
	n := 0
	for start := time.Now(); time.Since(start) < 2*ttl; n++ {
		require.NoError(t, b.fencer.StrictTx(ctx, b.db, l, write), "write %d", n)
	}
	require.NoError(t, l.Err(), "the holder's own writes were taken for a clone's")
	require.Len(t, b.writtenTokens(t), n)

	errAbandoned := errors.New("abandoned")
	err = b.fencer.StrictTx(ctx, b.db, l, func(context.Context, *sql.Tx) error { return errAbandoned })
	require.ErrorIs(t, err, errAbandoned)
	require.NoError(t, b.fencer.StrictTx(ctx, b.db, l, write), "a rolled-back write costs nothing")
	rec, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, rec.Seq, l.Seq(), "the client is in step with the chain")

	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, b.fencer.StrictTx(ctx, b.db, l, write), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.writtenTokens(t), n+1)
}
