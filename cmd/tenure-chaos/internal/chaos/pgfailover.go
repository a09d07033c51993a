package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/internal/faultnet"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// The postgres-failover cell keeps its leases on a PostgreSQL primary
// with an asynchronous standby, both started by the harness, and its
// chains in a [tokenResource] on the machine's Redis, which no fault
// touches. A resource outside the database is where a token handed out
// twice does harm: the holder of a tenure the failover lost and the new
// holder of the same token would both pass its fence. Workers and the
// harness reach the primary through one more proxy, the cell's virtual
// address, which a failover moves to the promoted standby.
//
// The harness also hands out tokens on other leases of the same
// database, one every 20 ms, as a database's other jobs do ([cell.churn]):
// the sequence behind the tokens moves on between two grants of the
// cell's lease, and a failover loses dozens of grants, not one or two.
// PostgreSQL logs a sequence 32 values ahead, so only a lag with more
// than that many grants makes a promoted standby hand out a token again.
//
// A failover ([cell.failover]) stops the standby, lets the primary go on
// alone for 0.2–2 × TTL, kills it, promotes the standby with the WAL it
// has, raises the token floor on it ([pgstore.Store.RaiseTokenFloor], as
// docs/OPERATIONS.md tells an operator to before workers come back),
// moves the virtual address to it and copies a new standby from it.
// CellConfig.NoTokenFloor skips the floor, to show what it prevents.

// faultFailover kills the primary after its standby lagged, and promotes
// the standby (postgres-failover).
const faultFailover = "failover"

// pgFailover is the postgres-failover cell's database: the pair and the
// virtual address in front of its primary.
type pgFailover struct {
	pair   *pgserver.PostgresPair
	vip    *faultnet.Proxy
	schema string
	floor  bool
}

// setupPostgresFailover starts the cell's primary and standby, migrates
// the schema and makes the harness's own store and reader. It returns
// the virtual address, which the workers' proxies forward to.
func (c *cell) setupPostgresFailover(ctx context.Context, id string, cleanups *[]func()) (string, error) {
	pair, err := pgserver.StartPostgresPair(ctx)
	if err != nil {
		return "", fmt.Errorf("chaos: %w", err)
	}
	*cleanups = append(*cleanups, func() { _ = pair.Stop() })
	vip, err := faultnet.Listen(pair.Primary.Addr())
	if err != nil {
		return "", fmt.Errorf("chaos: virtual address: %w", err)
	}
	*cleanups = append(*cleanups, func() { _ = vip.Close() })
	c.spec.PGURL, c.spec.Schema = pair.Primary.URL, "chaos_"+id
	pool, ps, err := pgPoolStore(ctx, c.spec.PGURL, vip.Addr(), "chaos_harness_"+id, c.spec.Schema)
	if err != nil {
		return "", err
	}
	*cleanups = append(*cleanups, func() { _ = ps.Close(); pool.Close() })
	if err := ps.Migrate(ctx); err != nil {
		return "", fmt.Errorf("chaos: migrate: %w", err)
	}
	res, err := c.setupTokenResource(ctx, id, cleanups)
	if err != nil {
		return "", err
	}
	c.pgPool, c.store, c.reader = pool, ps, res
	c.pgFailover = &pgFailover{pair: pair, vip: vip, schema: c.spec.Schema, floor: !c.cfg.NoTokenFloor}
	return vip.Addr(), nil
}

// pgPoolStore opens a pool to the database of u at addr (host:port) under
// the application name app, and a store over schema in it.
func pgPoolStore(ctx context.Context, u, addr, app, schema string) (*pgxpool.Pool, *pgstore.Store, error) {
	u, err := pgURL(u, addr, app)
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: postgres pool: %w", err)
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, st, nil
}

// openPostgresFailoverWorker is openWorker for the postgres-failover cell.
func openPostgresFailoverWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	pool, st, err := pgPoolStore(ctx, sp.PGURL, sp.StoreAddr, sp.App, sp.Schema)
	if err != nil {
		return nil, nil, nil, err
	}
	return withTokenResource(sp, st, func() { _ = st.Close(); pool.Close() })
}

// failover stops the standby, and after the drawn lag kills the primary
// and promotes the standby ([pgFailover.promote]), unless another
// failover is under way. tok is the token held when it strikes.
func (c *cell) failover(ctx context.Context, d draw, tok int64) {
	if !c.claimStore() {
		return
	}
	f := c.pgFailover
	lag := time.Duration((0.2 + 1.8*d.factor) * float64(c.cfg.TTL))
	c.hist.log(Event{Kind: kindFault, Fault: faultFailover, Target: targetStore, Token: tok, Dur: int64(lag),
		Detail: "the standby stops; the primary goes on alone, then dies"})
	f.pair.Standby.Kill()
	c.later(ctx, lag, func() {
		defer c.freeStore()
		if ctx.Err() != nil {
			return // the cell is over: its servers are stopped with it
		}
		start := time.Now()
		detail, err := f.promote(context.WithoutCancel(ctx))
		if err != nil {
			c.hist.log(Event{Kind: kindHeal, Fault: faultFailover, Target: targetStore, Detail: "failover failed: " + err.Error()})
			return
		}
		c.hist.log(Event{Kind: kindHeal, Fault: faultFailover, Target: targetStore, Dur: int64(time.Since(start)), Detail: detail})
		if err := f.pair.StartStandby(context.WithoutCancel(ctx)); err != nil {
			c.hist.log(Event{Kind: kindHeal, Fault: faultFailover, Target: targetStore, Detail: "no new standby: " + err.Error()})
		}
	})
}

// promote kills the primary, promotes the standby, raises the token floor
// on it (unless the cell skips the floor) before anyone else can reach
// it, then moves the virtual address to it and cuts what was left of the
// old primary's connections. It returns what happened, for the history.
func (f *pgFailover) promote(ctx context.Context) (string, error) {
	if err := f.pair.Failover(ctx); err != nil {
		return "", err
	}
	primary := f.pair.Primary
	detail := fmt.Sprintf("%s promoted; token floor not raised", primary.Addr())
	if f.floor {
		pool, st, err := pgPoolStore(ctx, primary.URL, "", "chaos_failover", f.schema)
		if err != nil {
			return "", err
		}
		floor, err := st.RaiseTokenFloor(ctx)
		_ = st.Close()
		pool.Close()
		if err != nil {
			return "", fmt.Errorf("chaos: raise the token floor: %w", err)
		}
		detail = fmt.Sprintf("%s promoted; token floor raised to %d", primary.Addr(), floor)
	}
	if err := f.vip.Retarget(primary.Addr()); err != nil {
		return "", err
	}
	f.vip.Cut()
	return detail, nil
}

// churn takes and releases a new lease of the cell's database every
// 20 ms until ctx ends, and logs each token it was handed (kindOther):
// the other jobs of a real database, and the tokens the checker needs to
// see to tell whether a failover handed one out twice.
func (c *cell) churn(ctx context.Context) {
	h := store.Holder{Label: "chaos-harness", Instance: "churn"}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("%s-other-%d", c.spec.Lease, i)
		actx, cancel := context.WithTimeout(ctx, c.cfg.TTL)
		g, err := c.store.Acquire(actx, store.AcquireParams{Name: name, Holder: h, TTL: c.cfg.TTL})
		if err == nil {
			c.hist.log(Event{Kind: kindOther, Token: int64(g.Token)})
			_ = c.store.Release(actx, store.ReleaseParams{Name: name, Holder: h, Token: g.Token})
		}
		cancel()
	}
}
