package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// testBundle is what the MySQL-specific tests work with.
type testBundle struct {
	owner *sql.DB
	cfg   mysqlstore.Config
	store *mysqlstore.Store
}

// setup returns a store on a fresh prefix named by cfg
// (mysqlserver.MySQLConfig when nil), migrated when migrate is set.
func setup(t *testing.T, cfg func(testing.TB) mysqlstore.Config, migrate bool) *testBundle {
	t.Helper()
	if cfg == nil {
		cfg = mysqlserver.MySQLConfig
	}
	b := &testBundle{owner: mysqlserver.MySQLDB(t, ""), cfg: cfg(t)}
	if migrate {
		mysqlserver.MySQLSchema(t, b.owner, b.cfg)
	} else {
		t.Cleanup(func() { mysqlserver.MySQLDrop(t, b.owner, b.cfg) })
	}
	b.store = newStore(t, b.owner, b.cfg)
	return b
}

func newStore(t testing.TB, db *sql.DB, cfg mysqlstore.Config) *mysqlstore.Store {
	t.Helper()
	s, err := mysqlstore.New(db, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

func (b *testBundle) acquire(t *testing.T, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl})
	require.NoError(t, err)
	return g
}

func (b *testBundle) table(name string) string { return b.store.Objects().Ident(name) }

func (b *testBundle) versions(t *testing.T) []int {
	t.Helper()
	rows, err := b.owner.QueryContext(t.Context(), "SELECT version FROM "+b.table(b.store.Objects().Migrations)+" ORDER BY version")
	require.NoError(t, err)
	vs := []int{}
	for rows.Next() {
		var v int
		require.NoError(t, rows.Scan(&v))
		vs = append(vs, v)
	}
	require.NoError(t, rows.Err())
	return vs
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg     mysqlstore.Config
		wantErr string
	}{
		"Defaults":            {cfg: mysqlstore.Config{}},
		"LongestPrefix":       {cfg: mysqlstore.Config{TablePrefix: strings.Repeat("é", mysqlstore.MaxTablePrefixLen)}},
		"PrefixTooLong":       {cfg: mysqlstore.Config{TablePrefix: strings.Repeat("p", mysqlstore.MaxTablePrefixLen+1)}, wantErr: "TablePrefix"},
		"DatabaseTooLong":     {cfg: mysqlstore.Config{Database: strings.Repeat("d", 65)}, wantErr: "Database"},
		"DatabaseEndsInSpace": {cfg: mysqlstore.Config{Database: "jobs "}, wantErr: "ends with a space"},
		"ControlChar":         {cfg: mysqlstore.Config{TablePrefix: "a\nb"}, wantErr: "control character"},
		"NUL":                 {cfg: mysqlstore.Config{Database: "a\x00b"}, wantErr: "control character"},
		"InvalidUTF8":         {cfg: mysqlstore.Config{TablePrefix: "a\xffb"}, wantErr: "UTF-8"},
		"OutsideBMP":          {cfg: mysqlstore.Config{TablePrefix: "a😀"}, wantErr: "Basic Multilingual Plane"},
		"PunctuationOK":       {cfg: mysqlstore.Config{Database: "a`b", TablePrefix: "`'\"; --x"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj, err := tc.cfg.Objects()
			if tc.wantErr != "" {
				require.ErrorIs(t, err, store.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				_, err = mysqlstore.New(&sql.DB{}, tc.cfg)
				require.ErrorIs(t, err, store.ErrInvalid, "New validates the config")
				_, err = tc.cfg.MigrationSQL()
				require.ErrorIs(t, err, store.ErrInvalid)
				return
			}
			require.NoError(t, err)
			require.Equal(t, obj.TablePrefix+"check_lease_strict", obj.CheckLeaseStrictProc)
		})
	}

	t.Run("DefaultNames", func(t *testing.T) {
		t.Parallel()
		obj, err := mysqlstore.Config{}.Objects()
		require.NoError(t, err)
		require.Equal(t, mysqlstore.Objects{
			TablePrefix: "tenure_", Leases: "tenure_leases", Fences: "tenure_fences", Tokens: "tenure_tokens", Migrations: "tenure_migrations", Functions: "tenure_functions",
			Waiters: "tenure_waiters", AcquireProc: "tenure_acquire_or_wait", RenewProc: "tenure_renew", ReleaseProc: "tenure_release", GetProc: "tenure_get_lease", ListProc: "tenure_list_leases",
			FenceProc: "tenure_fence", CheckLeaseProc: "tenure_check_lease", CheckLeaseStrictProc: "tenure_check_lease_strict",
		}, obj)
	})

	t.Run("Quote", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, "`a``b`", mysqlstore.Quote("", "a`b"))
		require.Equal(t, "`d`.`t`", mysqlstore.Quote("d", "t"))
	})

	t.Run("NilDB", func(t *testing.T) {
		t.Parallel()
		_, err := mysqlstore.New(nil, mysqlstore.Config{})
		require.ErrorIs(t, err, store.ErrInvalid)
	})

	t.Run("GrantSQL", func(t *testing.T) {
		t.Parallel()
		grants, err := mysqlstore.Config{Database: "jobs"}.GrantSQL("worker@10.0.%")
		require.NoError(t, err)
		require.Contains(t, grants, "GRANT EXECUTE ON PROCEDURE `jobs`.`tenure_acquire_or_wait` TO 'worker'@'10.0.%';")
		require.Equal(t, 8, strings.Count(grants, "GRANT EXECUTE ON PROCEDURE"))
		require.NotContains(t, grants, " ON TABLE", "no table privileges")
		for _, bad := range []string{"", "a'b", "a b", "x@y@z", "a;DROP"} {
			_, err := mysqlstore.Config{}.GrantSQL(bad)
			require.ErrorIs(t, err, store.ErrInvalid, "account %q", bad)
		}
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		require.Equal(t, []int{1}, b.versions(t))
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		require.NoError(t, b.store.Migrate(t.Context()))
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, []int{1}, b.versions(t))
		r, err := b.store.Get(t.Context(), "job")
		require.NoError(t, err)
		require.Equal(t, g.Token, r.Token, "migrating again keeps the data")
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		const callers = 8
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				s, err := mysqlstore.New(b.owner, b.cfg)
				if err != nil {
					errs <- err
					return
				}
				errs <- s.Migrate(t.Context())
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, []int{1}, b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	// The printed script runs in the mysql client, twice, and leaves
	// Migrate nothing to do.
	t.Run("PrintedScript", func(t *testing.T) {
		t.Parallel()
		b := setup(t, mysqlserver.MySQLWeirdConfig, false)
		script, err := b.cfg.MigrationSQL()
		require.NoError(t, err)
		require.Contains(t, script, "GET_LOCK(")
		require.Contains(t, script, "DELIMITER //")
		for range 2 {
			runScript(t, script)
		}
		require.Equal(t, []int{1}, b.versions(t))
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, []int{1}, b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		ctx := t.Context()
		h := testutil.Holder(t, "a")
		_, err := b.store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.ErrorIs(t, err, store.ErrNotMigrated, "Acquire")
		require.ErrorContains(t, err, "tenure migrate")
		_, err = b.store.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: 1, Seq: 1, TTL: time.Minute}})
		require.ErrorIs(t, err, store.ErrNotMigrated, "Renew")
		err = b.store.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: 1})
		require.ErrorIs(t, err, store.ErrNotMigrated, "Release")
		_, err = b.store.Get(ctx, "job")
		require.ErrorIs(t, err, store.ErrNotMigrated, "Get")
		_, err = b.store.List(ctx)
		require.ErrorIs(t, err, store.ErrNotMigrated, "List")

		require.NoError(t, b.store.Migrate(ctx))
		b.acquire(t, "job", h, time.Minute)
	})

	// The procedures run with their definer's rights: once the account
	// that migrated is dropped, every call fails and says why.
	t.Run("DefinerDropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		definer := mysqlserver.MySQLAccount(t, b.owner)
		_, err := b.owner.ExecContext(t.Context(), "GRANT CREATE, ALTER, DROP, CREATE ROUTINE, ALTER ROUTINE, SELECT, INSERT, UPDATE, DELETE ON "+
			mysqlstore.Quote("", b.cfg.Database)+".* TO '"+definer+"'@'%'")
		require.NoError(t, err)
		require.NoError(t, newStore(t, mysqlserver.MySQLDB(t, definer), b.cfg).Migrate(t.Context()))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		_, err = b.owner.ExecContext(t.Context(), "DROP USER '"+definer+"'@'%'")
		require.NoError(t, err)
		_, err = b.store.Get(t.Context(), "job")
		require.ErrorContains(t, err, "the procedures' definer, no longer exists")
	})

	t.Run("CounterRowMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		_, err := b.owner.ExecContext(t.Context(), "DELETE FROM "+b.table(b.store.Objects().Tokens))
		require.NoError(t, err)
		_, err = b.store.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
		require.ErrorIs(t, err, store.ErrNotMigrated)
		require.ErrorContains(t, err, "token counter row is missing")
		_, err = b.store.Get(t.Context(), "job")
		require.ErrorIs(t, err, store.ErrNotFound, "the refused acquisition left nothing behind")
	})
}

// runScript runs script with the mysql client as the test server's user,
// in its database.
func runScript(t *testing.T, script string) {
	t.Helper()
	bin, err := exec.LookPath("mariadb")
	if err != nil {
		bin, err = exec.LookPath("mysql")
	}
	testutil.NeedServer(t, "the mysql client (install Debian's mariadb-client)", err)
	cfg := mysqlserver.MySQLDriverConfig(t, "")
	host, port, err := net.SplitHostPort(cfg.Addr)
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), bin, "--protocol=tcp", "-h", host, "-P", port, "-u", cfg.User, cfg.DBName)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+cfg.Passwd)
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	owner := mysqlserver.MySQLDB(t, "")
	account := mysqlserver.MySQLAccount(t, owner)
	db := mysqlserver.MySQLDB(t, account)

	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, mysqlserver.MySQLHarness{Owner: owner, DB: db, Account: account, Config: mysqlserver.MySQLWeirdConfig})
	})

	t.Run("CannotMigrate", func(t *testing.T) {
		t.Parallel()
		cfg := mysqlserver.MySQLConfig(t)
		t.Cleanup(func() { mysqlserver.MySQLDrop(t, owner, cfg) })
		s := newStore(t, db, cfg)
		err := s.Migrate(t.Context())
		require.Error(t, err, "the run-time account has no DDL rights")
		require.ErrorContains(t, err, "denied")
	})

	// The account can only call the procedures: it cannot read, rewrite or
	// delete a lease, a token or a fence directly.
	t.Run("NoTableAccess", func(t *testing.T) {
		t.Parallel()
		cfg := mysqlserver.MySQLConfig(t)
		mysqlserver.MySQLSchema(t, owner, cfg)
		mysqlserver.MySQLGrant(t, owner, cfg, account)
		obj, err := cfg.Objects()
		require.NoError(t, err)
		s := newStore(t, db, cfg)
		_, err = s.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
		require.NoError(t, err)
		for _, stmt := range []string{
			"SELECT * FROM " + obj.Ident(obj.Leases),
			"UPDATE " + obj.Ident(obj.Leases) + " SET token = 1",
			"DELETE FROM " + obj.Ident(obj.Leases),
			"UPDATE " + obj.Ident(obj.Tokens) + " SET value = 0",
			"DELETE FROM " + obj.Ident(obj.Fences),
		} {
			_, err := db.ExecContext(t.Context(), stmt)
			require.ErrorContains(t, err, "denied", stmt)
		}
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()

	t.Run("SurviveRowDeletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		_, err := b.owner.ExecContext(t.Context(), "DELETE FROM "+b.table(b.store.Objects().Leases))
		require.NoError(t, err)
		_, err = b.store.Get(t.Context(), "job")
		require.ErrorIs(t, err, store.ErrNotFound)
		next := b.acquire(t, "job", testutil.Holder(t, "b"), time.Minute)
		require.Greater(t, next.Token, g.Token)
	})

	t.Run("SurviveRelease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		h := testutil.Holder(t, "a")
		g := b.acquire(t, "job", h, time.Minute)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}))
		again := b.acquire(t, "job", h, time.Minute)
		require.Greater(t, again.Token, g.Token, "the same holder's next tenure gets a greater token too")
	})

	// A migration run over existing tables (its record and the counter row
	// gone) starts the counter above every token in them.
	t.Run("MigrationSeedsTheCounter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		obj := b.store.Objects()
		for _, stmt := range []string{"DELETE FROM " + b.table(obj.Tokens), "DELETE FROM " + b.table(obj.Migrations)} {
			_, err := b.owner.ExecContext(t.Context(), stmt)
			require.NoError(t, err)
		}
		require.NoError(t, b.store.Migrate(t.Context()))
		next := b.acquire(t, "other", testutil.Holder(t, "b"), time.Minute)
		require.Greater(t, next.Token, g.Token)
	})

	t.Run("RacingFirstAcquisitions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		const rounds, racers = 20, 8
		var last store.Token
		for round := range rounds {
			name := "race_" + strconv.Itoa(round)
			type outcome struct {
				g   store.Grant
				err error
			}
			out := make(chan outcome, racers)
			var wg sync.WaitGroup
			for i := range racers {
				h := testutil.Holder(t, "racer"+strconv.Itoa(i))
				wg.Go(func() {
					g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
					out <- outcome{g, err}
				})
			}
			wg.Wait()
			close(out)
			var winners []store.Grant
			var held []*store.HeldError
			for o := range out {
				if o.err == nil {
					winners = append(winners, o.g)
					continue
				}
				var he *store.HeldError
				require.ErrorAs(t, o.err, &he)
				held = append(held, he)
			}
			require.Len(t, winners, 1, "round %d", round)
			require.Greater(t, winners[0].Token, last, "tokens grow across names")
			last = winners[0].Token
			for _, he := range held {
				require.Equal(t, winners[0].Holder, he.Holder, "a loser learns the winner")
				require.Equal(t, winners[0].Token, he.Token)
				require.Positive(t, he.Remaining)
			}
		}
	})
}

// TestClock shows that expiry is the server's SYSDATE, read when the
// statement runs: a session whose NOW() is frozen an hour ahead (SET
// timestamp) and whose time zone is another sees the same leases, with the
// same remaining time, as any other session.
func TestClock(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	cfg := mysqlserver.MySQLDriverConfig(t, "")
	ahead := time.Now().Add(time.Hour).Unix()
	cfg.Params = map[string]string{"timestamp": strconv.FormatInt(ahead, 10), "time_zone": "'+05:00'"}
	skewed := mysqlserver.MySQLOpen(t, cfg)
	var now int64
	require.NoError(t, skewed.QueryRowContext(t.Context(), "SELECT UNIX_TIMESTAMP(NOW())").Scan(&now))
	require.Equal(t, ahead, now, "the skewed session's NOW() is an hour ahead")
	skewedStore := newStore(t, skewed, b.cfg)

	const ttl = time.Minute
	g := b.acquire(t, "job", testutil.Holder(t, "a"), ttl)
	_, err := skewedStore.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "b"), TTL: ttl})
	var held *store.HeldError
	require.ErrorAs(t, err, &held, "the lease is held for the skewed session too")
	require.Equal(t, g.Token, held.Token)
	require.InDelta(t, ttl, held.Remaining, float64(5*time.Second))

	sg, err := skewedStore.Acquire(t.Context(), store.AcquireParams{Name: "other", Holder: testutil.Holder(t, "b"), TTL: ttl})
	require.NoError(t, err)
	r, err := b.store.Get(t.Context(), "other")
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, r.State)
	require.Equal(t, sg.Token, r.Token)
	require.InDelta(t, ttl, r.Remaining, float64(5*time.Second), "a lease granted in the skewed session lasts its TTL by the server's clock")
	require.WithinDuration(t, time.Now(), r.AcquiredAt, 5*time.Second, "AcquiredAt is the server's clock, not the session's")
}

// TestClockAfterLockWait shows that a call judges expiry by the clock read
// after it got its row locks: a renewal that waited while its lease
// expired is refused, and an acquisition that waited while the lease
// expired takes it.
func TestClockAfterLockWait(t *testing.T) {
	t.Parallel()
	for name, renew := range map[string]bool{"Renew": true, "Acquire": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, true)
			g := b.acquire(t, "job", testutil.Holder(t, "a"), store.MinTTL)
			tx, err := b.owner.BeginTx(t.Context(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback() })
			_, err = tx.ExecContext(t.Context(), "SELECT 1 FROM "+b.table(b.store.Objects().Leases)+" WHERE name = 'job' FOR UPDATE")
			require.NoError(t, err)
			type outcome struct {
				renewed bool
				err     error
			}
			done := make(chan outcome, 1)
			go func() {
				if renew {
					rs, err := b.store.Renew(t.Context(), []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
					done <- outcome{err == nil && rs[0].Renewed, err}
					return
				}
				_, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "b"), TTL: time.Minute})
				done <- outcome{err: err}
			}()
			time.Sleep(g.Remaining + 50*time.Millisecond) // The store's expiry is the event itself.
			require.NoError(t, tx.Rollback())
			o := testutil.Receive(t, done, "the call", 10*time.Second)
			require.NoError(t, o.err)
			require.False(t, o.renewed, "the lease expired while the renewal waited")
		})
	}
}

func TestRenewBatch(t *testing.T) {
	t.Parallel()

	// A batch locks only its own leases (by primary key): a lease locked
	// by another transaction does not hold up the renewal of the others.
	t.Run("LocksOnlyItsOwnLeases", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		mine := b.acquire(t, "mine", testutil.Holder(t, "a"), time.Minute)
		b.acquire(t, "other", testutil.Holder(t, "b"), time.Minute)
		tx, err := b.owner.BeginTx(t.Context(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback() })
		_, err = tx.ExecContext(t.Context(), "SELECT 1 FROM "+b.table(b.store.Objects().Leases)+" WHERE name = 'other' FOR UPDATE")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		rs, err := b.store.Renew(ctx, []store.RenewParams{{Name: "mine", Holder: mine.Holder, Token: mine.Token, Seq: mine.Seq, TTL: time.Minute}})
		require.NoError(t, err)
		require.True(t, rs[0].Renewed)
	})

	// The report of a batch is longer than the session's
	// group_concat_max_len, which cuts JSON_ARRAYAGG on MariaDB: the
	// procedure raises it while it builds the report, and puts the
	// session's value back.
	t.Run("ReportLongerThanGroupConcatMaxLen", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		cfg := mysqlserver.MySQLDriverConfig(t, "")
		cfg.Params = map[string]string{"group_concat_max_len": "1024"}
		small := mysqlserver.MySQLOpen(t, cfg)
		small.SetMaxOpenConns(1)
		s := newStore(t, small, b.cfg)
		h := store.Holder{Label: strings.Repeat("l", store.MaxLabelLen), Instance: strings.Repeat("i", store.MaxInstanceLen)}
		ps := make([]store.RenewParams, 20)
		for i := range ps {
			name := fmt.Sprintf("%03d", i) + strings.Repeat("n", store.MaxNameLen-3)
			g, err := s.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
			require.NoError(t, err)
			ps[i] = store.RenewParams{Name: name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}
		}
		rs, err := s.Renew(t.Context(), ps)
		require.NoError(t, err)
		for i, r := range rs {
			require.True(t, r.Renewed, "lease %d", i)
		}
		var gcml int
		require.NoError(t, small.QueryRowContext(t.Context(), "SELECT @@SESSION.group_concat_max_len").Scan(&gcml))
		require.Equal(t, 1024, gcml, "the session's value is put back")
	})

	t.Run("Large", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		const n = 300
		h := testutil.Holder(t, "a")
		ps := make([]store.RenewParams, n)
		for i := range ps {
			g := b.acquire(t, fmt.Sprintf("job%03d", i), h, time.Minute)
			ps[i] = store.RenewParams{Name: g.Name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}
		}
		ps[7].Seq = 5
		rs, err := b.store.Renew(t.Context(), ps)
		require.NoError(t, err)
		require.Len(t, rs, n)
		for i, r := range rs {
			require.Equal(t, ps[i].Name, r.Grant.Name)
			if i == 7 {
				require.False(t, r.Renewed, "a seq mismatch is not renewed")
				require.Equal(t, int64(1), r.Grant.Seq)
				continue
			}
			require.True(t, r.Renewed, "lease %d", i)
			require.Equal(t, int64(2), r.Grant.Seq)
		}
	})
}

func TestUnavailable(t *testing.T) {
	t.Parallel()

	t.Run("ClosedDB", func(t *testing.T) {
		t.Parallel()
		cfg := mysqlserver.MySQLConfig(t)
		owner := mysqlserver.MySQLDB(t, "")
		mysqlserver.MySQLSchema(t, owner, cfg)
		db := mysqlserver.MySQLDB(t, "")
		s := newStore(t, db, cfg)
		require.NoError(t, db.Close())
		_, err := s.Get(t.Context(), "job")
		require.ErrorIs(t, err, store.ErrUnavailable)
	})

	t.Run("DeadlineWhileBlocked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		// database/sql rolls the transaction back itself once the test's
		// context ends, which may be before this cleanup.
		tx, err := b.owner.BeginTx(t.Context(), nil)
		require.NoError(t, err)
		t.Cleanup(func() {
			if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
				require.NoError(t, err)
			}
		})
		_, err = tx.ExecContext(t.Context(), "SELECT 1 FROM "+b.table(b.store.Objects().Leases)+" FOR UPDATE")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err = b.store.Renew(ctx, []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.ErrorIs(t, err, store.ErrUnavailable, "a renewal cut off by its deadline has an unknown outcome")
		require.ErrorContains(t, err, "may have been applied")
	})
}

// TestOlderLibrarysAcquireKept: migration 003 keeps 002's acquire_lease,
// which workers of an older library call, beside acquire_or_wait; a lease
// one of them takes is held for this version too.
func TestOlderLibrarysAcquireKept(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	obj := b.store.Objects()
	var (
		acquired                      bool
		label, instance, payload      string
		token, seq, remaining, decide int64
	)
	require.NoError(t, b.owner.QueryRowContext(t.Context(),
		"CALL "+obj.Ident(obj.TablePrefix+"acquire_lease")+"(?, ?, ?, ?, ?)", "job", "old", "worker-1", time.Minute.Microseconds(), "").
		Scan(&acquired, &label, &instance, &token, &seq, &remaining, &decide, &payload))
	require.True(t, acquired, "an older worker acquires through 002's procedure")
	_, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "new"), TTL: time.Minute})
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, store.Holder{Label: "old", Instance: "worker-1"}, held.Holder)
	require.Equal(t, store.Token(token), held.Token)
}
