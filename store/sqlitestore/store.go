package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DefaultBusyTimeout is how long a call waits for another connection or
// process to finish its write transaction when [Config.BusyTimeout] is zero.
const DefaultBusyTimeout = 5 * time.Second

// DefaultPollInterval is how often [Store.Listen] looks for commits of
// other connections when [Config.PollInterval] is zero. See
// [Config.PollInterval] for why it is 10 ms.
const DefaultPollInterval = 10 * time.Millisecond

// Config configures [Open]. The zero value is ready to use.
type Config struct {
	// BusyTimeout is how long one call waits for the database's write lock
	// while another connection or process holds it, before failing with an
	// error matching [store.ErrUnavailable]. Calls of one process on one
	// file (of every Store it opened on that path) queue among themselves
	// first, in order, for at most as long again ([Store.Acquire]
	// calls made at once wait before that for their turn in a shared
	// transaction, as long as the transactions ahead of them take). Zero
	// means [DefaultBusyTimeout]; negative values are refused. A longer timeout
	// rides out longer transactions of other processes (yours included:
	// a fenced write through [Store.DB] holds the lock until it commits) at
	// the price of a slower failure when the file is wedged. The call's
	// context cuts the wait short as well.
	BusyTimeout time.Duration

	// PollInterval is how often [Store.Listen] asks SQLite whether another
	// connection or process has committed (PRAGMA data_version, which
	// reads no table), and so about the longest a follower waits to hear
	// of a release made through another Store or process; a release made
	// through the follower's own Store reaches it as the release commits.
	// Zero means [DefaultPollInterval] (10 ms); values below 1 ms or
	// negative are refused. Only a poll after a commit also reads the
	// leases that changed. A [github.com/tenure-dev/tenure.Client]
	// listens for as long as it runs.
	//
	// Measured on a busy two-core machine (BenchmarkHandover,
	// BenchmarkHandoverAcrossProcesses and BenchmarkListenIdle, two or
	// three runs each): a handover between clients of two Stores takes a
	// median of 18–19 ms at 25 ms (90th percentile 28 ms), 9–12 ms at
	// 10 ms (13–18 ms) and 6–8 ms at 5 ms (8–12 ms); between two processes
	// at 10 ms 10–11 ms (15–16 ms); between clients of one Store 3–6 ms,
	// whatever the interval. An idle listener, alone in its
	// process, costs about 1–1.6% of one core at 25 ms, 1.8–2.3% at 10 ms
	// and 4–4.7% at 5 ms, most of it the process waking from idle; 20
	// listeners in one process cost about 0.4%, 0.6% and 0.5–0.8% each.
	// The default of 10 ms keeps the median handover well under 20 ms
	// for less than one percentage point of a core more than 25 ms;
	// longer intervals save CPU at the price of slower handovers.
	PollInterval time.Duration

	// HistoryRetention is how long [Store.History] keeps an event, by the
	// host clock. Zero means [DefaultHistoryRetention] (30 days); less
	// than [MinHistoryRetention] is refused. Every event recorded deletes
	// at most 16 events older than this, oldest first, so the work an
	// acquisition or a release pays stays bounded. Processes sharing a
	// file should agree on it: each deletes by its own.
	HistoryRetention time.Duration
}

// DefaultHistoryRetention is how long the history keeps events when
// [Config.HistoryRetention] is zero.
const DefaultHistoryRetention = 30 * 24 * time.Hour

// MinHistoryRetention is the shortest [Config.HistoryRetention].
const MinHistoryRetention = time.Minute

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.BusyTimeout < 0:
		return c, fmt.Errorf("sqlitestore: %w: BusyTimeout (%s) must not be negative; use 0 for the default of %s",
			store.ErrInvalid, c.BusyTimeout, DefaultBusyTimeout)
	case c.BusyTimeout == 0:
		c.BusyTimeout = DefaultBusyTimeout
	case c.BusyTimeout < time.Millisecond:
		return c, fmt.Errorf("sqlitestore: %w: BusyTimeout (%s) must be at least 1ms; SQLite counts it in milliseconds",
			store.ErrInvalid, c.BusyTimeout)
	}
	switch {
	case c.HistoryRetention == 0:
		c.HistoryRetention = DefaultHistoryRetention
	case c.HistoryRetention < MinHistoryRetention:
		return c, fmt.Errorf("sqlitestore: %w: HistoryRetention (%s) must be at least %s; use 0 for the default of %s",
			store.ErrInvalid, c.HistoryRetention, MinHistoryRetention, DefaultHistoryRetention)
	}
	switch {
	case c.PollInterval == 0:
		c.PollInterval = DefaultPollInterval
	case c.PollInterval < time.Millisecond:
		return c, fmt.Errorf("sqlitestore: %w: PollInterval (%s) must be at least 1ms; use 0 for the default of %s",
			store.ErrInvalid, c.PollInterval, DefaultPollInterval)
	}
	return c, nil
}

// Store is a [store.Store] kept in one SQLite file; docs/STORES.md lists
// the optional interfaces of package store it implements. It is safe for
// concurrent use by many goroutines and, through the file, by many
// processes on the same host.
type Store struct {
	db   *sql.DB
	path string
	cfg  Config
	gate *storekit.Gate
	// writeSem lets one of this process's write transactions on the file
	// at a time ask SQLite for its write lock, so goroutines of one
	// process queue here, in order (for at most the busy timeout, and
	// honouring their contexts), instead of polling SQLite's busy handler
	// against each other. Every Store of the process on the same path
	// shares it (see [openFile]).
	writeSem chan struct{}
	// acquires sends the Acquire calls made at once together (see Acquire).
	acquires *storekit.AcquireGroup

	// listenersMu guards listeners, the Listen calls that this Store's own
	// commits are announced to at once (see [Store.Listen]).
	listenersMu sync.Mutex
	listeners   map[*listener]struct{}
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.Lister        = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)
	_ store.Historian     = (*Store)(nil)
	_ store.ForceReleaser = (*Store)(nil)
)

// Open opens the lease database at path, creating the file (mode 0600) and
// its parent directory (mode 0700) when they are missing, switches it to
// WAL journal mode and creates or upgrades the schema. Several processes may
// Open the same path at once; each waits for the others' locks for up to
// [Config.BusyTimeout]. The returned [Store] owns its connections:
// [Store.Close] closes them.
//
// A path that cannot hold a database (a directory, a file that is not a
// SQLite database, a directory this user cannot write) fails with an error
// naming the path and what to do about it.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	abs, err := preparePath(path)
	if err != nil {
		return nil, err
	}
	connector, err := sqlite.NewConnector(dsn(abs, cfg))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: cannot use path %q: %w", abs, err)
	}
	s := &Store{
		db:        sql.OpenDB(connector),
		path:      abs,
		cfg:       cfg,
		gate:      storekit.NewGate("sqlitestore", "sqlitestore.Open"),
		writeSem:  openFile(abs),
		listeners: make(map[*listener]struct{}),
	}
	s.acquires = storekit.NewAcquireGroup("sqlitestore", s.acquireTogether)
	if err := s.setup(ctx); err != nil {
		_ = s.db.Close() // The setup error is the one worth reporting.
		closeFile(abs)
		return nil, err
	}
	return s, nil
}

// files holds the write semaphore of each database file this process has
// open, by absolute path, and how many open Stores use it. Stores on one
// file in one process (several clients, each with a Store of its own)
// share it: their writes queue in the order they came, where SQLite's
// busy handler would let whichever retried at the right moment go first
// and put the others to sleep for up to 100 ms at a time, long enough for
// a follower to miss the [store.Handoff] kept for it.
var files = struct {
	sync.Mutex
	open map[string]*openedFile
}{open: make(map[string]*openedFile)}

type openedFile struct {
	writeSem chan struct{}
	stores   int
}

// openFile returns the write semaphore of the file at path, for a Store
// being opened on it.
func openFile(path string) chan struct{} {
	files.Lock()
	defer files.Unlock()
	f := files.open[path]
	if f == nil {
		f = &openedFile{writeSem: make(chan struct{}, 1)}
		files.open[path] = f
	}
	f.stores++
	return f.writeSem
}

// closeFile forgets the write semaphore of the file at path once no open
// Store uses it.
func closeFile(path string) {
	files.Lock()
	defer files.Unlock()
	if f := files.open[path]; f != nil {
		if f.stores--; f.stores == 0 {
			delete(files.open, path)
		}
	}
}

// preparePath makes path absolute and makes sure its directory and file
// exist, so that SQLite's own "unable to open" is replaced by a clear error
// and a new file is private to its user.
func preparePath(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("sqlitestore: %w: database path is empty; pass a file path such as the one DefaultPath returns", store.ErrInvalid)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: %w: cannot make database path %q absolute: %w", store.ErrInvalid, path, err)
	}
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("sqlitestore: cannot create directory %q for the database: %w; create it or choose another path", dir, err)
	}
	info, err := os.Stat(abs)
	switch {
	case err == nil && info.IsDir():
		return "", fmt.Errorf("sqlitestore: database path %q is a directory; pass a file path inside it, such as %q", abs, filepath.Join(abs, "tenure.db"))
	case err == nil && !info.Mode().IsRegular():
		return "", fmt.Errorf("sqlitestore: database path %q is not a regular file (%s); choose another path", abs, info.Mode().Type())
	case errors.Is(err, os.ErrNotExist):
		f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return "", fmt.Errorf("sqlitestore: cannot create database file %q: %w; make its directory writable by this user or choose another path", abs, err)
		}
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("sqlitestore: cannot create database file %q: %w", abs, err)
		}
	case err != nil:
		return "", fmt.Errorf("sqlitestore: cannot inspect database path %q: %w; check the permissions of its directories", abs, err)
	}
	return abs, nil
}

// dsn builds the connection string for every connection of the pool. Write
// transactions begin IMMEDIATE, so they take the file's write lock before
// reading anything and processes serialise instead of failing on a lock
// upgrade. synchronous=FULL makes every committed token survive power loss.
func dsn(abs string, cfg Config) string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Set("_busy_timeout", strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10))
	q.Set("_synchronous", "FULL")
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	if u.Path[0] != '/' {
		u.Path = "/" + u.Path
	}
	return u.String()
}

// Bounds of the pause between two attempts of [Store.setup].
const (
	setupRetryMin = time.Millisecond
	setupRetryMax = 50 * time.Millisecond
)

// setup switches the file to WAL and migrates the schema. Some of the locks
// this takes on a fresh file are refused with SQLITE_BUSY at once, without
// SQLite's busy handler: switching to WAL upgrades a read lock, and SQLite
// answers busy rather than wait when another connection is doing the same
// (waiting could deadlock). Processes that open a fresh file together meet
// exactly that, so setup tries again, after a short random pause, until it
// succeeds or the busy timeout has passed since it began.
func (s *Store) setup(ctx context.Context) error {
	deadline := time.Now().Add(s.cfg.BusyTimeout)
	pause := setupRetryMin
	for {
		err := s.setupOnce(ctx)
		if err == nil || !isBusy(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return err
		}
		wait := time.NewTimer(min(pause/2+rand.N(pause), left))
		select {
		case <-wait.C:
		case <-ctx.Done():
			wait.Stop()
			return s.classify("open", ctx.Err())
		}
		pause = min(2*pause, setupRetryMax)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
}

// setupOnce is one attempt of [Store.setup].
func (s *Store) setupOnce(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return s.classify("open", err)
	}
	if mode != "wal" {
		return fmt.Errorf("sqlitestore: database %q refused WAL journal mode (it reports %q); put it on a local file system that supports shared memory", s.path, mode)
	}
	return s.migrate(ctx)
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// DB returns the store's own database handle, for the caller's fenced writes
// to tables in the same file (see [Fence]). Its transactions begin
// IMMEDIATE: a [sql.DB.BeginTx] takes the file's write lock at once (a
// read-only transaction does not) and holds it until commit or rollback, so
// keep them short, and do not call the store's own methods while holding
// one: they would wait for that lock and fail with [store.ErrUnavailable]
// after [Config.BusyTimeout]. Do not close it; [Store.Close] does.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the store's database handle, the one [Store.DB] returns.
// Later calls fail with [store.ErrClosed] and every [Store.Listen]
// returns; a second Close does nothing.
func (s *Store) Close() error {
	if !s.gate.Close() {
		return nil
	}
	closeFile(s.path)
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("sqlitestore: close %q: %w", s.path, err)
	}
	return nil
}

// write is one transaction of [Store.writeTx]: the transaction, the host
// clock read after its write lock was taken, and what its commit announces.
type write struct {
	tx      *sql.Tx
	now     int64
	notices []stamped
}

// announce has the commit of w announce n, stamped with change.
func (w *write) announce(change int64, n store.Notice) {
	w.notices = append(w.notices, stamped{change: change, notice: n})
}

// writeTx runs f in one IMMEDIATE transaction and commits unless f fails;
// a refusal ([*store.HeldError]) is not a failure: what f wrote (a
// follower's place in line) commits, and the refusal is returned. Once
// committed, and before the next write of this Store may begin, what f
// announced is offered to this Store's listeners. Errors are classified
// here; f may return tenure errors, which pass through.
func (s *Store) writeTx(ctx context.Context, op string, f func(w *write) error) error {
	wait := time.NewTimer(s.cfg.BusyTimeout)
	select {
	case s.writeSem <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		return fmt.Errorf("sqlitestore: %s: %w: other calls of this process kept %q busy for longer than the busy timeout (%s); retry or raise Config.BusyTimeout",
			op, store.ErrUnavailable, s.path, s.cfg.BusyTimeout)
	case <-ctx.Done():
		wait.Stop()
		return s.classify(op, ctx.Err())
	}
	defer func() { <-s.writeSem }()

	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.classify(op, err)
	}
	w := &write{tx: tx, now: time.Now().UnixNano()}
	ferr := f(w)
	var held *store.HeldError
	if ferr != nil && !errors.As(ferr, &held) {
		_ = tx.Rollback() // The error from f says what happened; rollback only ends the transaction.
		return s.classify(op, ferr)
	}
	if err := tx.Commit(); err != nil {
		return s.classify(op, err)
	}
	s.offer(w.notices)
	return ferr
}

// expiry returns now + ttl, refusing a TTL whose expiry cannot be stored.
func expiry(name string, now int64, ttl time.Duration) (int64, error) {
	if int64(ttl) > math.MaxInt64-now {
		return 0, fmt.Errorf("%w: TTL %s for lease %q is too long to store; use a shorter one", store.ErrInvalid, ttl, name)
	}
	return now + int64(ttl), nil
}

// row is one tenure_leases row.
type row struct {
	holder     store.Holder
	token      store.Token
	seq        int64
	acquiredAt int64
	expiresAt  int64
	released   bool
	payload    string
	ttl        int64        // the TTL the tenure was granted, in nanoseconds
	keptFor    store.Holder // the follower a release keeps the lease for
	keptUntil  int64        // until when it is kept
	// changed stamps the lease's last new tenure or release; ttl and the
	// kept lease are valid only when lineChanged equals it (see migration
	// 005).
	changed     int64
	lineChanged int64
}

// leaseColumns are the columns scanRow reads, in its order.
const leaseColumns = `holder_label, holder_instance, token, seq, acquired_at, expires_at, released, payload,
    ttl, kept_label, kept_instance, kept_until, changed, line_changed`

const selectLease = `SELECT ` + leaseColumns + ` FROM tenure_leases WHERE name = ?`

type scanner interface{ Scan(dest ...any) error }

// namedRow is a row with its lease name.
type namedRow struct {
	name string
	row
}

// scanNamed scans the name and then the columns of scanRow.
func scanNamed(sc scanner) (namedRow, error) {
	var n namedRow
	err := sc.Scan(append([]any{&n.name}, n.dest()...)...)
	return n, err
}

func scanRow(sc scanner) (row, error) {
	var r row
	err := sc.Scan(r.dest()...)
	return r, err
}

// dest returns where to scan [leaseColumns] into.
func (r *row) dest() []any {
	return []any{&r.holder.Label, &r.holder.Instance, &r.token, &r.seq, &r.acquiredAt, &r.expiresAt, &r.released, &r.payload,
		&r.ttl, &r.keptFor.Label, &r.keptFor.Instance, &r.keptUntil, &r.changed, &r.lineChanged}
}

// held reports whether r is held at now by the store's clock.
func (r row) held(now int64) bool { return !r.released && r.expiresAt > now }

// grant reports r as the store sees it at now, without the payload (a
// renewal reports none; see store.Grant).
func (r row) grant(name string, now int64) store.Grant {
	g := store.Grant{Name: name, Token: r.token, Seq: r.seq}
	if r.held(now) {
		g.Holder = r.holder
		g.Remaining = time.Duration(r.expiresAt - now)
		g.At = time.Unix(0, now).UTC()
	}
	return g
}

// record reports r as [Store.Get] does at now.
func (r row) record(name string, now int64) store.Record {
	rec := store.Record{Grant: r.grant(name, now), AcquiredAt: time.Unix(0, r.acquiredAt).UTC()}
	rec.Holder = r.holder
	rec.Payload = r.payload
	switch {
	case r.released:
		rec.State = store.StateReleased
	case r.held(now):
		rec.State = store.StateHeld
	default:
		rec.State = store.StateExpired
	}
	return rec
}

// Acquire implements [store.Store.Acquire] in one IMMEDIATE transaction.
//
// Calls made at once, by any callers of the store, share transactions
// (group commit), and so the file's write lock and its commits: while
// fewer than two acquisitions are out, a call goes at once, alone; calls
// made while two are out wait for one to come back and then go together,
// up to 1,000 to a transaction (as [Store.AcquireBatch] sends them), each
// lease at most once a transaction. A call whose context ends while it
// waits for its turn is not attempted; one whose context ends while its
// transaction is under way returns at once and may have been applied; the
// transaction goes on for the others until the last of them has left. A
// transaction that fails as a whole fails each of its calls with the error
// its own transaction would have had.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.gate.Check("acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("sqlitestore: acquire: %w", err)
	}
	return s.acquires.Acquire(ctx, p)
}

// acquireTogether is the round trip of Acquire's group: one transaction
// for every lease of ps.
func (s *Store) acquireTogether(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult {
	res, err := s.acquireBatch(ctx, ps)
	if err != nil {
		res = make([]store.AcquireResult, len(ps))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

// AcquireBatch implements [store.BatchAcquirer.AcquireBatch] in one
// transaction: each lease attempted as [Store.Acquire] attempts it, the
// refusals (and a TTL too long to store) reported in their places.
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.gate.Check("acquire"); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, fmt.Errorf("sqlitestore: acquire: %w", err)
	}
	if len(ps) == 0 {
		return []store.AcquireResult{}, nil
	}
	return s.acquireBatch(ctx, ps)
}

// acquireBatch carries out ps, which are valid, in one transaction.
func (s *Store) acquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	var res []store.AcquireResult
	err := s.writeTx(ctx, "acquire", func(w *write) error {
		res = make([]store.AcquireResult, len(ps))
		for i, p := range ps {
			g, err := s.acquireOne(ctx, w, p)
			var held *store.HeldError
			switch {
			case errors.As(err, &held):
				res[i].Err = err
			case errors.Is(err, store.ErrInvalid):
				res[i].Err = fmt.Errorf("sqlitestore: acquire: %w", err)
			case err != nil:
				return err
			default:
				res[i].Grant = g
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// acquireOne attempts p in w: the grant, or a refusal ([*store.HeldError],
// with the caller put in line when it waits). A TTL too long to store is
// refused before anything is written.
func (s *Store) acquireOne(ctx context.Context, w *write, p store.AcquireParams) (store.Grant, error) {
	tx, now := w.tx, w.now
	exp, err := expiry(p.Name, now, p.TTL)
	if err != nil {
		return store.Grant{}, err
	}
	cur, err := scanRow(tx.QueryRowContext(ctx, selectLease, p.Name))
	known := err == nil
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return store.Grant{}, err
	default:
		if err := refuse(ctx, tx, now, p, cur); err != nil {
			return store.Grant{}, err
		}
	}
	// The counter is the token source; taking the maximum with the
	// lease's own last token keeps P2 even for a counter restored
	// from an older copy of the file.
	var tok store.Token
	var change int64
	err = tx.QueryRowContext(ctx,
		`UPDATE tenure_counter SET last_token = max(last_token, ?) + 1, last_change = last_change + 1
WHERE id = 1 RETURNING last_token, last_change`,
		cur.token).Scan(&tok, &change)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Grant{}, fmt.Errorf("%w: the token counter row is missing from %s", store.ErrNotMigrated, s.path)
	}
	if err != nil {
		return store.Grant{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO tenure_leases
    (name, holder_label, holder_instance, token, seq, acquired_at, expires_at, released, changed, payload,
     ttl, kept_label, kept_instance, kept_until, line_changed)
VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, 0, ?7, ?8, ?9, '', '', 0, ?7)
ON CONFLICT (name) DO UPDATE SET
    holder_label = excluded.holder_label,
    holder_instance = excluded.holder_instance,
    token = excluded.token,
    seq = 1,
    acquired_at = excluded.acquired_at,
    expires_at = excluded.expires_at,
    released = 0,
    changed = excluded.changed,
    payload = excluded.payload,
    ttl = excluded.ttl,
    kept_label = '',
    kept_instance = '',
    kept_until = 0,
    line_changed = excluded.line_changed`,
		p.Name, p.Holder.Label, p.Holder.Instance, tok, now, exp, change, p.Payload, int64(p.TTL))
	if err != nil {
		return store.Grant{}, err
	}
	if known {
		if err := leaveLine(ctx, tx, p.Name, p.Holder); err != nil {
			return store.Grant{}, err
		}
	}
	w.announce(change, store.Notice{Name: p.Name, Kind: store.NoticeAcquired, Holder: p.Holder, Remaining: p.TTL})
	ev := store.HistoryEvent{Name: p.Name, Kind: store.EventGranted, Holder: p.Holder, Token: tok}
	if cur.token != 0 {
		ev.PreviousHolder, ev.PreviousToken = cur.holder, cur.token
		if !cur.released {
			ev.Kind = store.EventTakenOver
		}
	}
	if err := s.record(ctx, tx, now, ev); err != nil {
		return store.Grant{}, err
	}
	return store.Grant{Name: p.Name, Holder: p.Holder, Token: tok, Seq: 1, Remaining: p.TTL, At: time.Unix(0, now).UTC(), Payload: p.Payload}, nil
}

// Renew implements [store.Store.Renew]: the whole batch in one IMMEDIATE
// transaction.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.gate.Check("renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("sqlitestore: renew: %w", err)
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	var results []store.RenewResult
	err := s.writeTx(ctx, "renew", func(w *write) error {
		tx, now := w.tx, w.now
		results = make([]store.RenewResult, len(ps))
		update, err := tx.PrepareContext(ctx, `UPDATE tenure_leases SET seq = seq + 1, expires_at = ?
WHERE name = ? AND holder_label = ? AND holder_instance = ? AND token = ? AND seq = ?
    AND released = 0 AND expires_at > ?
RETURNING seq`)
		if err != nil {
			return err
		}
		defer update.Close()
		get, err := tx.PrepareContext(ctx, selectLease)
		if err != nil {
			return err
		}
		defer get.Close()
		for i, p := range ps {
			exp, err := expiry(p.Name, now, p.TTL)
			if err != nil {
				return err
			}
			var seq int64
			err = update.QueryRowContext(ctx, exp, p.Name, p.Holder.Label, p.Holder.Instance, p.Token, p.Seq, now).Scan(&seq)
			if err == nil {
				results[i] = store.RenewResult{Renewed: true, Grant: store.Grant{
					Name: p.Name, Holder: p.Holder, Token: p.Token, Seq: seq, Remaining: p.TTL,
					At: time.Unix(0, now).UTC(),
				}}
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			cur, err := scanRow(get.QueryRowContext(ctx, p.Name))
			switch {
			case errors.Is(err, sql.ErrNoRows):
				results[i] = store.RenewResult{Grant: store.Grant{Name: p.Name}}
			case err != nil:
				return err
			default:
				results[i] = store.RenewResult{Grant: cur.grant(p.Name, now)}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// Release implements [store.Store.Release] in one IMMEDIATE transaction.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "release", p, store.EventReleased)
}

// ForceRelease implements [store.ForceReleaser]: [Store.Release], recorded
// in the history as force-released.
func (s *Store) ForceRelease(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "force release", p, store.EventForceReleased)
}

func (s *Store) release(ctx context.Context, op string, p store.ReleaseParams, kind store.EventKind) error {
	if err := s.gate.Check(op); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return s.writeTx(ctx, op, func(w *write) error {
		return s.releaseOne(ctx, w, p, kind)
	})
}

// ReleaseBatch implements [store.BatchReleaser.ReleaseBatch] in one
// transaction.
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if err := s.gate.Check("release"); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, fmt.Errorf("sqlitestore: release: %w", err)
	}
	var errs []error
	err := s.writeTx(ctx, "release", func(w *write) error {
		errs = make([]error, len(ps))
		for i, p := range ps {
			err := s.releaseOne(ctx, w, p, store.EventReleased)
			switch {
			case errors.Is(err, store.ErrNotHeld):
				errs[i] = fmt.Errorf("sqlitestore: release: %w", err)
			case err != nil:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// releaseOne releases one tenure in w, keeps the lease for the head of
// its line for [store.Handoff], and records the release as kind.
func (s *Store) releaseOne(ctx context.Context, w *write, p store.ReleaseParams, kind store.EventKind) error {
	tx, now := w.tx, w.now
	next, err := head(ctx, tx, now, p.Name)
	if err != nil {
		return err
	}
	keptUntil := int64(0)
	if next != (store.Holder{}) {
		keptUntil = now + int64(store.Handoff)
	}
	// The lease is stamped with the change counter's next value, which
	// the counter takes below once the release matched.
	var change int64
	err = tx.QueryRowContext(ctx, `UPDATE tenure_leases SET expires_at = ?1, released = 1,
    changed = (SELECT last_change + 1 FROM tenure_counter WHERE id = 1),
    line_changed = (SELECT last_change + 1 FROM tenure_counter WHERE id = 1),
    kept_label = ?6, kept_instance = ?7, kept_until = ?8
WHERE name = ?2 AND holder_label = ?3 AND holder_instance = ?4 AND token = ?5
    AND released = 0 AND expires_at > ?1
RETURNING changed`,
		now, p.Name, p.Holder.Label, p.Holder.Instance, p.Token, next.Label, next.Instance, keptUntil).Scan(&change)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("lease %q is not held by %s with token %d: %w", p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	if err != nil {
		return err
	}
	if _, err = tx.ExecContext(ctx, `UPDATE tenure_counter SET last_change = last_change + 1 WHERE id = 1`); err != nil {
		return err
	}
	w.announce(change, store.Notice{Name: p.Name, Kind: store.NoticeReleased, Next: next})
	return s.record(ctx, tx, now, store.HistoryEvent{Name: p.Name, Kind: kind, Holder: p.Holder, Token: p.Token})
}

// Get implements [store.Store.Get].
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.gate.Check("get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("sqlitestore: get: %w", err)
	}
	r, err := scanRow(s.db.QueryRowContext(ctx, selectLease, name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Record{}, fmt.Errorf("sqlitestore: get: lease %q: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, s.classify("get", err)
	}
	// The clock is read after the row, so a concurrent renewal can only
	// make the reported remaining time shorter than the truth.
	return r.record(name, time.Now().UnixNano()), nil
}

// List implements [store.Lister.List]: every lease, ordered by name.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.gate.Check("list"); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT name, `+leaseColumns+` FROM tenure_leases ORDER BY name`)
	if err != nil {
		return nil, s.classify("list", err)
	}
	defer rows.Close()
	var all []namedRow
	for rows.Next() {
		n, err := scanNamed(rows)
		if err != nil {
			return nil, s.classify("list", err)
		}
		all = append(all, n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify("list", err)
	}
	now := time.Now().UnixNano()
	recs := make([]store.Record, len(all))
	for i, n := range all {
		recs[i] = n.record(n.name, now)
	}
	return recs, nil
}
