package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// callTracer records the lease names of every statement a pool sends to
// the functions it traces, and holds the first ones until the test lets
// them go.
type callTracer struct {
	lone  string   // the quoted name of a function whose first argument is one lease's name
	batch []string // the quoted names of functions whose first argument is an array of names

	mu         sync.Mutex
	statements [][]string // the names each traced statement carried
	hold       int        // statements still to hold

	held    chan struct{} // a value for each statement held
	release chan struct{} // closed to let the held statements go
}

// newAcquireTracer traces the acquire and acquire_batch statements.
func newAcquireTracer(obj pgstore.Objects, hold int) *callTracer {
	return newCallTracer(obj.AcquireFunc, []string{obj.AcquireBatchFunc}, hold)
}

// newRenewTracer traces the renew statements.
func newRenewTracer(obj pgstore.Objects, hold int) *callTracer {
	return newCallTracer("", []string{obj.RenewFunc}, hold)
}

func newCallTracer(lone string, batch []string, hold int) *callTracer {
	tr := &callTracer{hold: hold, held: make(chan struct{}, hold), release: make(chan struct{})}
	if lone != "" {
		tr.lone = `"` + lone + `"`
	}
	for _, fn := range batch {
		tr.batch = append(tr.batch, `"`+fn+`"`)
	}
	return tr
}

func (tr *callTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	var names []string
	switch {
	case slices.ContainsFunc(tr.batch, func(fn string) bool { return strings.Contains(data.SQL, fn) }):
		names = data.Args[0].([]string)
	case tr.lone != "" && strings.Contains(data.SQL, tr.lone):
		names = []string{data.Args[0].(string)}
	default:
		return ctx
	}
	tr.mu.Lock()
	tr.statements = append(tr.statements, names)
	hold := tr.hold > 0
	tr.hold--
	tr.mu.Unlock()
	if hold {
		tr.held <- struct{}{}
		<-tr.release
	}
	return ctx
}

func (*callTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// sent returns the names of every traced statement sent so far.
func (tr *callTracer) sent() [][]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.statements
}

// tracedStore returns a store like b's, on a pool of its own traced by tr.
func tracedStore(t *testing.T, b *testBundle, mode pgx.QueryExecMode, tr *callTracer) *pgstore.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL())
	require.NoError(t, err)
	cfg.ConnConfig.DefaultQueryExecMode = mode
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return newStore(t, pool, b.cfg)
}

// TestAcquireCallsMadeAtOnceGoTogether: hundreds of Acquire calls made at
// once from as many goroutines, for as many holders (clients sharing one
// store), take a few statements, and each is answered as a lone call
// would be: every new lease granted to its caller with a token of its own,
// and of the calls for one name, one granted and the others refused with
// the winner's tenure.
func TestAcquireCallsMadeAtOnceGoTogether(t *testing.T) {
	t.Parallel()
	for name, mode := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, true)
			tr := newAcquireTracer(b.store.Objects(), storekit.Flights)
			s := tracedStore(t, b, mode, tr)
			calls := storetest.ManyCallersAtOnce(t, s, tr.held, tr.release)
			sent := tr.sent()
			require.LessOrEqual(t, len(sent), 12, "%d calls made at once take a few statements, not one each: %v", calls, sizes(sent))
		})
	}
}

// TestAcquireCallsTogetherBeforeMigration009: on a schema migrated only
// up to 008, calls that go together fail with ErrNotMigrated, each naming
// its own lease and the fix, and lone calls still work, as the package
// documentation says.
func TestAcquireCallsTogetherBeforeMigration009(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, false)
	require.NoError(t, pgstore.LegacyMigrateTo(t.Context(), b.store, 8))
	tr := newAcquireTracer(b.store.Objects(), storekit.Flights)
	s := tracedStore(t, b, pgx.QueryExecModeCacheStatement, tr)
	h := testutil.Holder(t, "older-schema")
	ps := make([]store.AcquireParams, 40)
	for i := range ps {
		ps[i] = store.AcquireParams{Name: fmt.Sprintf("lease-%02d", i), Holder: h, TTL: time.Minute}
	}

	res := storetest.CallAtOnce(t, s, tr.held, tr.release, ps)

	together := map[string]int{} // lease → the size of its batch
	for _, names := range tr.sent() {
		if len(names) > 1 {
			for _, name := range names {
				together[name] = len(names)
			}
		}
	}
	require.NotEmpty(t, together, "calls went together: %v", sizes(tr.sent()))
	for i, r := range res {
		name := ps[i].Name
		k, batched := together[name]
		if !batched {
			require.NoError(t, r.Err, "%s went alone", name)
			continue
		}
		require.ErrorIs(t, r.Err, store.ErrNotMigrated, name)
		require.ErrorContains(t, r.Err, fmt.Sprintf("pgstore: acquire lease %q (in a batch of %d): ", name, k))
		require.ErrorContains(t, r.Err, "tenure migrate")
	}
}

// sizes returns how many leases each statement carried.
func sizes(statements [][]string) []int {
	ns := make([]int, len(statements))
	for i, s := range statements {
		ns[i] = len(s)
	}
	return ns
}

// TestRenewCallsMadeAtOnceGoTogether: the renewal rounds of many clients
// sharing one store, made at once, take a few statements, and each call
// gets its own leases' results, in its order; a clone's round for the same
// leases with the same seq goes in a later statement and is refused, as
// the chain (promise P6) requires.
func TestRenewCallsMadeAtOnceGoTogether(t *testing.T) {
	t.Parallel()
	const clients, leases = 40, 25
	b := setup(t, nil, true)
	rounds := make([][]store.RenewParams, clients)
	for c := range rounds {
		h := testutil.Holder(t, fmt.Sprintf("client-%d", c))
		for i := range leases {
			g := b.acquire(t, fmt.Sprintf("c%02d-lease-%02d", c, i), h, time.Minute)
			rounds[c] = append(rounds[c], store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: time.Minute})
		}
	}
	clone := slices.Clone(rounds[clients-1])
	tr := newRenewTracer(b.store.Objects(), storekit.Flights)
	s := tracedStore(t, b, pgx.QueryExecModeCacheStatement, tr)
	type answer struct {
		res []store.RenewResult
		err error
	}

	calls := append(rounds, clone)
	answers := storetest.AtOnce(t, tr.held, tr.release, calls, func(ps []store.RenewParams) (a answer) {
		a.res, a.err = s.Renew(t.Context(), ps)
		return a
	})

	clones := 0
	for c, a := range answers {
		ps := calls[c]
		require.NoError(t, a.err, "round %d", c)
		require.Len(t, a.res, len(ps), "round %d", c)
		for i, r := range a.res {
			require.Equal(t, ps[i].Name, r.Grant.Name, "round %d answers its own leases in order", c)
			if !r.Renewed {
				require.Contains(t, []int{clients - 1, clients}, c, "only the last client and its clone are rivals: %s", r.Grant.Name)
				require.Equal(t, int64(2), r.Grant.Seq, "refused with the seq its rival's renewal left")
				clones++
				continue
			}
			require.Equal(t, ps[i].Token, r.Grant.Token)
			require.Equal(t, int64(2), r.Grant.Seq)
		}
	}
	require.Equal(t, leases, clones, "of a lease's two renewals with one seq, one is refused")
	sent := tr.sent()
	require.LessOrEqual(t, len(sent), 6, "%d rounds made at once take a few statements, not one each: %v", clients+1, sizes(sent))
	for _, names := range sent {
		require.Len(t, names, len(slices.Compact(slices.Sorted(slices.Values(names)))), "a lease goes once a statement")
	}
}
