package pgstore_test

import (
	"context"
	"fmt"
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

// acquireTracer records the lease names of every acquire statement a pool
// sends, and holds the first ones until the test lets them go.
type acquireTracer struct {
	lone, batch string // the functions' quoted names, as the statements call them

	mu         sync.Mutex
	statements [][]string // the names each acquire statement carried
	hold       int        // statements still to hold

	held    chan struct{} // a value for each statement held
	release chan struct{} // closed to let the held statements go
}

func newAcquireTracer(obj pgstore.Objects, hold int) *acquireTracer {
	return &acquireTracer{
		lone: `"` + obj.AcquireFunc + `"`, batch: `"` + obj.AcquireBatchFunc + `"`,
		hold: hold, held: make(chan struct{}, hold), release: make(chan struct{}),
	}
}

func (tr *acquireTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	var names []string
	switch {
	case strings.Contains(data.SQL, tr.batch):
		names = data.Args[0].([]string)
	case strings.Contains(data.SQL, tr.lone):
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

func (*acquireTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// sent returns the names of every acquire statement sent so far.
func (tr *acquireTracer) sent() [][]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.statements
}

// tracedStore returns a store like b's, on a pool of its own traced by tr.
func tracedStore(t *testing.T, b *testBundle, mode pgx.QueryExecMode, tr *acquireTracer) *pgstore.Store {
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
			tr := newAcquireTracer(b.store.Objects(), storekit.AcquireFlights)
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
	require.NoError(t, pgstore.MigrateTo(t.Context(), b.store, 8))
	tr := newAcquireTracer(b.store.Objects(), storekit.AcquireFlights)
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
