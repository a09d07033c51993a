package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/store"
)

// The postgres-slots cell: the workers share the lease as a semaphore of
// slotsCellN slots (tenure.Client.CampaignSlot), five workers for three
// slots. Each slot is a lease of its own, chaos-ID#K, with its own token
// sequence, so each has a fenced chain (and a twin) of its own:
// chaos_fenced_K, written in pgfence.StrictTx with the slot's lease. The
// checker runs over each slot's chains as over one lease's; a write
// accepted at a slot's fenced chain from a tenure that is not that slot's
// latest would be a stale acceptance, so at most three tenures, one per
// slot, have their writes accepted at any moment. The twins show what the
// same writes do without the fence.
const (
	slotsBackend = "postgres-slots"
	slotsCellN   = 3
	// slotTokenStride separates the slots' tokens when their chains are
	// checked as one: slot K's tokens are raised by K strides, so each
	// slot's chain follows the one before with greater tokens and the
	// checks of one chain see no boundary. PostgreSQL's tokens of a cell
	// stay far below it.
	slotTokenStride = int64(1) << 40
)

// slotsCell is the postgres-slots backend; [cellBackends] lists it.
var slotsCell = &cellBackend{name: slotsBackend, faults: append([]string{faultTerminate}, clones...),
	setup: (*cell).setupPostgresSlots, open: openPostgresSlotsWorker}

// faultTurn counts the faults of a postgres-slots cell, whose holders
// the nemesis strikes in turn, slot by slot.
var faultTurn atomic.Int64

// faultLease is the lease whose holder the next fault strikes: the cell's
// lease, or in the postgres-slots cell its slots in turn.
func (c *cell) faultLease() string {
	if n := c.spec.LeaseSlots; n > 0 {
		return tenure.SlotName(c.spec.Lease, int((faultTurn.Add(1)-1)%int64(n)))
	}
	return c.spec.Lease
}

// setupPostgresSlots is setupPostgres with a chain pair per slot.
func (c *cell) setupPostgresSlots(ctx context.Context, id string, cleanups *[]func()) ([]string, error) {
	c.spec.LeaseSlots = slotsCellN
	targets, err := c.setupPostgres(ctx, id, cleanups)
	if err != nil {
		return nil, err
	}
	if _, err := c.pgPool.Exec(ctx, slotTablesSQL(c.spec.Schema)); err != nil {
		return nil, fmt.Errorf("chaos: create slot tables: %w", err)
	}
	res, err := newSlotResource(c.reader.(*pgResource), c.spec.Schema)
	if err != nil {
		return nil, err
	}
	c.reader = res
	return targets, nil
}

func slotTablesSQL(schema string) string {
	q := pgx.Identifier{schema}.Sanitize()
	var b strings.Builder
	for k := range slotsCellN {
		fmt.Fprintf(&b, "CREATE TABLE %[1]s.chaos_fenced_%[2]d (n bigint PRIMARY KEY, token bigint NOT NULL, wid text NOT NULL);\n", q, k)
		fmt.Fprintf(&b, "CREATE TABLE %[1]s.chaos_twin_%[2]d (n bigint PRIMARY KEY, token bigint NOT NULL, wid text NOT NULL);\n", q, k)
	}
	return b.String()
}

// openPostgresSlotsWorker is openWorker for the postgres-slots cell.
func openPostgresSlotsWorker(ctx context.Context, sp spec) (store.Store, resource, func(), error) {
	st, res, closeAll, err := openPostgresWorker(ctx, sp)
	if err != nil {
		return nil, nil, nil, err
	}
	sr, err := newSlotResource(res.(*pgResource), sp.Schema)
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return st, sr, closeAll, nil
}

// slotResource writes each slot's chains. The twin write names no lease:
// it goes to the twin of the slot of the fenced write just before it
// (a worker writes one pair at a time).
type slotResource struct {
	*pgResource
	fencedTables, twinTables []string
	current                  atomic.Int32
}

func newSlotResource(r *pgResource, schema string) (*slotResource, error) {
	q := pgx.Identifier{schema}.Sanitize()
	s := &slotResource{pgResource: r}
	for k := range slotsCellN {
		s.fencedTables = append(s.fencedTables, fmt.Sprintf("%s.chaos_fenced_%d", q, k))
		s.twinTables = append(s.twinTables, fmt.Sprintf("%s.chaos_twin_%d", q, k))
	}
	return s, nil
}

// linkTo reads the head of a chain table and writes the next link.
func linkTo(ctx context.Context, tx pgx.Tx, table string, tok store.Token, wid string) error {
	var head int64
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(n), 0) FROM "+table).Scan(&head); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, "INSERT INTO "+table+" (n, token, wid) VALUES ($1, $2, $3) ON CONFLICT (n) DO UPDATE SET token = excluded.token, wid = excluded.wid",
		head+1, int64(tok), wid)
	return err
}

func (s *slotResource) fenced(ctx context.Context, l *tenure.Lease, tok store.Token, wid string) error {
	k, ok := l.Slot()
	if !ok || k >= slotsCellN {
		return fmt.Errorf("chaos: lease %q is no slot of the cell's %d", l.Name(), slotsCellN)
	}
	s.current.Store(int32(k))
	return s.fencer.StrictTx(ctx, s.pool, l, func(ctx context.Context, tx pgx.Tx) error {
		return linkTo(ctx, tx, s.fencedTables[k], tok, wid)
	})
}

func (s *slotResource) twin(ctx context.Context, tok store.Token, wid string) error {
	table := s.twinTables[s.current.Load()]
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return linkTo(ctx, tx, table, tok, wid) })
}

// rows reads every slot's chain of res as one: slot K's rows follow slot
// K−1's, numbered on, their tokens raised by K strides (see
// [slotTokens], which raises the history's alike).
func (s *slotResource) rows(ctx context.Context, res string) ([]Row, error) {
	tables := s.fencedTables
	if res == resTwin {
		tables = s.twinTables
	}
	chains := make([][]Row, len(tables))
	for k, table := range tables {
		rows, err := s.pool.Query(ctx, "SELECT n, token, wid FROM "+table+" ORDER BY n")
		if err != nil {
			return nil, fmt.Errorf("chaos: read %s of slot %d: %w", res, k, err)
		}
		chains[k], err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Row, error) {
			var r Row
			err := row.Scan(&r.N, &r.Token, &r.WID)
			r.Writer, _ = splitWID(r.WID)
			return r, err
		})
		if err != nil {
			return nil, fmt.Errorf("chaos: read %s of slot %d: %w", res, k, err)
		}
	}
	return joinSlotChains(chains), nil
}

// joinSlotChains returns the slots' chains (each in the order of N) as
// one: slot K's rows follow slot K−1's, numbered on, their tokens raised
// by K strides.
func joinSlotChains(chains [][]Row) []Row {
	var all []Row
	for k, chain := range chains {
		base := int64(len(all))
		for _, r := range chain {
			r.N += base
			r.Token += int64(k) * slotTokenStride
			all = append(all, r)
		}
	}
	return all
}

// checkCell is [check] for a cell of backend: for the postgres-slots
// cell over the slots' chains read as one and the history's tokens
// raised alike ([slotTokens]), and with its cycles counted per slot (a
// grant of a slot follows the slot's previous grant, not the last grant
// of any slot).
func checkCell(backend string, events []Event, fenced, twin []Row, ttl time.Duration) Verdict {
	if backend != slotsBackend {
		return check(events, fenced, twin, ttl)
	}
	events = slotTokens(events)
	v := check(events, fenced, twin, ttl)
	v.Cycles, v.Takeovers = 0, nil
	timed := byTime(events)
	for k := range int64(slotsCellN) {
		var of []Event
		for _, e := range timed {
			if e.Kind != kindAcquired || e.Token/slotTokenStride == k {
				of = append(of, e)
			}
		}
		n, lat := cycles(of, ttl)
		v.Cycles += n
		v.Takeovers = append(v.Takeovers, lat...)
	}
	return v
}

// slotTokens raises the tokens of a postgres-slots history as
// [slotResource.rows] raises the chains': a tenure's slot is the one its
// acquisition or adoption names (Detail: the slot's lease). A token of no known slot is left
// alone; the checker then finds its writes in no chain.
func slotTokens(events []Event) []Event {
	slotOf := make(map[int64]int64)
	for _, e := range events {
		if e.Kind != kindAcquired && e.Kind != kindAdopted {
			continue
		}
		if _, k, ok := store.ParseSlotName(e.Detail); ok {
			slotOf[e.Token] = int64(k)
		}
	}
	out := make([]Event, len(events))
	for i, e := range events {
		if k, ok := slotOf[e.Token]; ok && e.Token > 0 {
			e.Token += k * slotTokenStride
		}
		out[i] = e
	}
	return out
}
