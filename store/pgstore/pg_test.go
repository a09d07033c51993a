package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// eventTimeout bounds every wait for an event.
const eventTimeout = 10 * time.Second

// testBundle is what the PostgreSQL-specific tests work with.
type testBundle struct {
	owner *pgxpool.Pool
	cfg   pgstore.Config
	store *pgstore.Store
}

// setup returns a store on a fresh schema named by cfg (pgserver.PostgresConfig
// when nil), migrated when migrate is set.
func setup(t *testing.T, cfg func(testing.TB) pgstore.Config, migrate bool) *testBundle {
	t.Helper()
	if cfg == nil {
		cfg = pgserver.PostgresConfig
	}
	b := &testBundle{owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, ""), cfg: cfg(t)}
	if migrate {
		pgserver.PostgresSchema(t, b.owner, b.cfg)
	} else {
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, b.owner, b.cfg.Schema) })
	}
	b.store = newStore(t, b.owner, b.cfg)
	return b
}

func newStore(t *testing.T, pool *pgxpool.Pool, cfg pgstore.Config) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(pool, cfg)
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

func (b *testBundle) versions(t *testing.T) []int {
	t.Helper()
	obj := b.store.Objects()
	rows, err := b.owner.Query(t.Context(), "SELECT version FROM "+pgx.Identifier{obj.Schema, obj.Migrations}.Sanitize()+" ORDER BY version")
	require.NoError(t, err)
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	return vs
}

func TestConfig(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		cfg     pgstore.Config
		wantErr string
		want    pgstore.Objects
	}{
		"Defaults": {cfg: pgstore.Config{}, want: pgstore.Objects{
			Schema: "public", TablePrefix: "tenure_",
			Leases: "tenure_leases", Fences: "tenure_fences", TokenSeq: "tenure_token_seq", Migrations: "tenure_migrations", Functions: "tenure_functions",
			FenceResets: "tenure_fence_resets", AcquireFunc: "tenure_acquire", AcquireBatchFunc: "tenure_acquire_batch", AcquireSlotFunc: "tenure_acquire_slot", RenewFunc: "tenure_renew",
			ReleaseFunc: "tenure_release", GetFunc: "tenure_get_lease", ListFunc: "tenure_list_leases",
			FenceFunc: "tenure_fence", CheckLeaseFunc: "tenure_check_lease", CheckLeaseStrictFunc: "tenure_check_lease_strict",
			FenceForeignFunc: "tenure_fence_foreign", FenceResetFunc: "tenure_fence_reset",
			History: "tenure_history", Settings: "tenure_settings", Waiters: "tenure_waiters", HistoryReadFunc: "tenure_history_read",
			ForceReleaseFunc: "tenure_force_release", RecordHistoryFunc: "tenure_record_history",
			Windows: "tenure_windows", WindowStartFunc: "tenure_window_start", WindowFinishFunc: "tenure_window_finish",
			WindowGetFunc: "tenure_window_get", HistoryEventsFunc: "tenure_history_events",
			Channel: "public.tenure_leases",
		}},
		"Custom": {cfg: pgstore.Config{Schema: "Ops", TablePrefix: "x"}, want: pgstore.Objects{
			Schema: "Ops", TablePrefix: "x",
			Leases: "xleases", Fences: "xfences", TokenSeq: "xtoken_seq", Migrations: "xmigrations", Functions: "xfunctions",
			FenceResets: "xfence_resets", AcquireFunc: "xacquire", AcquireBatchFunc: "xacquire_batch", AcquireSlotFunc: "xacquire_slot", RenewFunc: "xrenew",
			ReleaseFunc: "xrelease", GetFunc: "xget_lease", ListFunc: "xlist_leases",
			FenceFunc: "xfence", CheckLeaseFunc: "xcheck_lease", CheckLeaseStrictFunc: "xcheck_lease_strict",
			FenceForeignFunc: "xfence_foreign", FenceResetFunc: "xfence_reset",
			History: "xhistory", Settings: "xsettings", Waiters: "xwaiters", HistoryReadFunc: "xhistory_read",
			ForceReleaseFunc: "xforce_release", RecordHistoryFunc: "xrecord_history",
			Windows: "xwindows", WindowStartFunc: "xwindow_start", WindowFinishFunc: "xwindow_finish", WindowGetFunc: "xwindow_get",
			HistoryEventsFunc: "xhistory_events",
			Channel:           "Ops.xleases",
		}},
		"LongestPrefix":     {cfg: pgstore.Config{TablePrefix: strings.Repeat("p", pgstore.MaxTablePrefixLen)}},
		"PrefixTooLong":     {cfg: pgstore.Config{TablePrefix: strings.Repeat("p", pgstore.MaxTablePrefixLen+1)}, wantErr: "TablePrefix"},
		"SchemaTooLong":     {cfg: pgstore.Config{Schema: strings.Repeat("s", 64)}, wantErr: "Schema"},
		"Dollar":            {cfg: pgstore.Config{TablePrefix: "a$b"}, wantErr: "'$'"},
		"ControlChar":       {cfg: pgstore.Config{Schema: "a\nb"}, wantErr: "control character"},
		"NUL":               {cfg: pgstore.Config{TablePrefix: "a\x00b"}, wantErr: "control character"},
		"InvalidUTF8":       {cfg: pgstore.Config{Schema: "a\xffb"}, wantErr: "UTF-8"},
		"PunctuationOK":     {cfg: pgstore.Config{Schema: `a "b"; c`, TablePrefix: `'x'-`}},
		"UnicodeOK":         {cfg: pgstore.Config{Schema: "lëases", TablePrefix: "ünï_"}},
		"LongNameHashed":    {cfg: pgstore.Config{Schema: strings.Repeat("s", 63), TablePrefix: "t_"}},
		"RetentionShort":    {cfg: pgstore.Config{HistoryRetention: time.Second}, wantErr: "HistoryRetention (1s) must be at least 1m0s"},
		"RetentionNegative": {cfg: pgstore.Config{HistoryRetention: -time.Hour}, wantErr: "HistoryRetention"},
		"RetentionOK":       {cfg: pgstore.Config{HistoryRetention: time.Hour}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obj, err := tc.cfg.Objects()
			if err == nil {
				_, err = tc.cfg.MigrationSQL()
			}
			if tc.wantErr != "" {
				require.ErrorIs(t, err, store.ErrInvalid)
				require.ErrorContains(t, err, tc.wantErr)
				_, err = pgstore.New(&pgxpool.Pool{}, tc.cfg)
				require.ErrorIs(t, err, store.ErrInvalid, "New validates the config")
				return
			}
			require.NoError(t, err)
			require.LessOrEqual(t, len(obj.Channel), 63, "a channel name must fit NAMEDATALEN")
			if tc.want != (pgstore.Objects{}) {
				require.Equal(t, tc.want, obj)
			}
		})
	}

	t.Run("NilPool", func(t *testing.T) {
		t.Parallel()
		_, err := pgstore.New(nil, pgstore.Config{})
		require.ErrorIs(t, err, store.ErrInvalid)
	})

	t.Run("DistinctChannels", func(t *testing.T) {
		t.Parallel()
		a, err := pgstore.Config{Schema: strings.Repeat("s", 63), TablePrefix: "a_"}.Objects()
		require.NoError(t, err)
		b, err := pgstore.Config{Schema: strings.Repeat("s", 63), TablePrefix: "b_"}.Objects()
		require.NoError(t, err)
		require.NotEqual(t, a.Channel, b.Channel)
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("Idempotent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		require.Equal(t, pgstore.Versions(), b.versions(t))
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		require.NoError(t, b.store.Migrate(t.Context()))
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, pgstore.Versions(), b.versions(t))
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
				s, err := pgstore.New(b.owner, b.cfg)
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
		require.Equal(t, pgstore.Versions(), b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	t.Run("AnotherBuildsNumbering", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		obj := b.store.Objects()
		table := pgx.Identifier{obj.Schema, obj.Migrations}.Sanitize()
		_, err := b.owner.Exec(t.Context(), "UPDATE "+table+" SET name = 'something_else' WHERE version = 1")
		require.NoError(t, err)
		err = b.store.Migrate(t.Context())
		require.ErrorContains(t, err, `records migration 001 as "something_else", but this library's 001 is "tables"`)
	})

	t.Run("ExistingSchema", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		_, err := b.owner.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{b.cfg.Schema}.Sanitize())
		require.NoError(t, err)
		require.NoError(t, b.store.Migrate(t.Context()))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	t.Run("PrintedScript", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgserver.PostgresWeirdConfig, false)
		script, err := b.cfg.MigrationSQL()
		require.NoError(t, err)
		require.Contains(t, script, "BEGIN;")
		require.Contains(t, script, "pg_advisory_xact_lock")
		for range 2 {
			_, err = b.owner.Exec(t.Context(), script)
			require.NoError(t, err, "the printed script runs, and runs again")
		}
		require.Equal(t, pgstore.Versions(), b.versions(t))
		require.NoError(t, b.store.Migrate(t.Context()), "Migrate after the script has nothing to do")
		require.Equal(t, pgstore.Versions(), b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		for name, createSchema := range map[string]bool{"NoSchema": false, "EmptySchema": true} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, nil, false)
				if createSchema {
					_, err := b.owner.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{b.cfg.Schema}.Sanitize())
					require.NoError(t, err)
				}
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
			})
		}
	})
}

func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	role := pgserver.PostgresRole(t, owner)
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)

	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, pgserver.PostgresHarness{Owner: owner, Pool: pool, Role: role, Config: pgserver.PostgresWeirdConfig})
	})

	t.Run("CannotMigrate", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, cfg.Schema) })
		s := newStore(t, pool, cfg)
		err := s.Migrate(t.Context())
		require.Error(t, err, "the run-time role has no DDL rights")
		require.ErrorContains(t, err, "permission denied")
	})

	t.Run("NoDelete", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		pgserver.PostgresSchema(t, owner, cfg)
		pgserver.PostgresGrant(t, owner, cfg, role)
		obj, err := cfg.Objects()
		require.NoError(t, err)
		_, err = pool.Exec(t.Context(), "DELETE FROM "+pgx.Identifier{obj.Schema, obj.Leases}.Sanitize())
		require.ErrorContains(t, err, "permission denied", "the grants allow no DELETE")
	})
}

func TestListen(t *testing.T) {
	t.Parallel()

	t.Run("ReconnectsAfterBackendKilled", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		pids := make(chan uint32, 8)
		pgstore.SetListenHook(b.store, func(pid uint32) { pids <- pid })
		names := make(chan string, 64)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- b.store.Listen(ctx, func(n store.Notice) {
				select {
				case names <- n.Name:
				default:
				}
			})
		}()
		first := receive(t, pids, "the first LISTEN")
		var killed bool
		require.NoError(t, b.owner.QueryRow(t.Context(), "SELECT pg_terminate_backend($1)", first).Scan(&killed))
		require.True(t, killed)
		second := receive(t, pids, "a LISTEN on a new connection")
		require.NotEqual(t, first, second)
		// The hook runs after each LISTEN was announced with the empty name.
		require.Empty(t, receive(t, names, "the announcement of the first LISTEN"))
		require.Empty(t, receive(t, names, "the announcement of the second LISTEN"))

		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		require.NoError(t, b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
		for got := ""; got != g.Name; {
			got = receive(t, names, "the notification of the release")
		}

		cancel()
		require.ErrorIs(t, receive(t, done, "Listen's return"), context.Canceled)
	})

	t.Run("OneConnectionForEveryListener", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		pids := make(chan uint32, 8)
		pgstore.SetListenHook(b.store, func(pid uint32) { pids <- pid })
		var heard []*testutil.Notifications
		for range 3 {
			r := testutil.NewNotifications()
			testutil.RunListener(t, t.Context(), b.store.Listen, r.Notify, eventTimeout)
			require.True(t, r.Wait("", eventTimeout), "each listener hears that it is subscribed")
			heard = append(heard, r)
		}
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		for _, r := range heard {
			require.True(t, r.WaitFor(func(n store.Notice) bool {
				return n.Name == "job" && n.Kind == store.NoticeAcquired && n.Holder == g.Holder
			}, eventTimeout), "every listener hears the acquisition")
		}
		receive(t, pids, "the LISTEN")
		require.Empty(t, pids, "the three listeners share one LISTEN connection")
	})

	t.Run("PrefixesAreSeparate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		other := b.cfg
		other.TablePrefix = "other_"
		pgserver.PostgresSchema(t, b.owner, other)
		otherStore := newStore(t, b.owner, other)

		names := make(chan string, 64)
		pids := make(chan uint32, 1)
		pgstore.SetListenHook(b.store, func(pid uint32) { pids <- pid })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- b.store.Listen(ctx, func(n store.Notice) {
				select {
				case names <- n.Name:
				default:
				}
			})
		}()
		receive(t, pids, "LISTEN")

		h := testutil.Holder(t, "a")
		g, err := otherStore.Acquire(t.Context(), store.AcquireParams{Name: "other", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.Token(1), g.Token, "each prefix has its own token sequence")
		b.acquire(t, "mine", h, time.Minute)
		got := receive(t, names, "the notification of the subscription")
		require.Empty(t, got, "LISTEN is announced with the empty name")
		require.Equal(t, "mine", receive(t, names, "the notification of mine"),
			"the other prefix's acquisition, made first, is not announced on this channel")

		cancel()
		require.ErrorIs(t, receive(t, done, "Listen's return"), context.Canceled)
	})

	t.Run("NilNotify", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		require.ErrorIs(t, b.store.Listen(t.Context(), nil), store.ErrInvalid)
	})
}

func TestTokens(t *testing.T) {
	t.Parallel()

	t.Run("SurviveRowDeletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		obj := b.store.Objects()
		_, err := b.owner.Exec(t.Context(), "DELETE FROM "+pgx.Identifier{obj.Schema, obj.Leases}.Sanitize())
		require.NoError(t, err)
		next := b.acquire(t, "job", testutil.Holder(t, "b"), time.Minute)
		require.Greater(t, next.Token, g.Token)
	})

	t.Run("RacingFirstAcquisitions", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		const rounds, racers = 20, 8
		for round := range rounds {
			name := "race_" + string(rune('a'+round))
			type outcome struct {
				g   store.Grant
				err error
			}
			out := make(chan outcome, racers)
			var wg sync.WaitGroup
			for i := range racers {
				h := testutil.Holder(t, "racer"+string(rune('0'+i)))
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
			for _, he := range held {
				require.Equal(t, winners[0].Holder, he.Holder, "a loser learns the winner")
				require.Equal(t, winners[0].Token, he.Token)
				require.Positive(t, he.Remaining)
			}
		}
	})
}

func TestUnavailable(t *testing.T) {
	t.Parallel()

	t.Run("ClosedPool", func(t *testing.T) {
		t.Parallel()
		cfg := pgserver.PostgresConfig(t)
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		pgserver.PostgresSchema(t, owner, cfg)
		pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		s := newStore(t, pool, cfg)
		pool.Close()
		_, err := s.Get(t.Context(), "job")
		require.ErrorIs(t, err, store.ErrUnavailable)
	})

	t.Run("DeadlineWhileBlocked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		obj := b.store.Objects()
		tx, err := b.owner.Begin(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, tx.Rollback(context.Background())) })
		_, err = tx.Exec(t.Context(), "SELECT 1 FROM "+pgx.Identifier{obj.Schema, obj.Leases}.Sanitize()+" FOR UPDATE")
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err = b.store.Renew(ctx, []store.RenewParams{{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.ErrorIs(t, err, store.ErrUnavailable, "a renewal cut off by its deadline has an unknown outcome")
		require.ErrorContains(t, err, "may have been applied")
	})
}

// receive waits for one value from ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return testutil.Receive(t, ch, what, eventTimeout)
}
