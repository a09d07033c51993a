package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

// Defaults of [Config].
const (
	// DefaultInterval is how often the server reads the store.
	DefaultInterval = time.Second
	// DefaultReadTimeout bounds one read of the store.
	DefaultReadTimeout = 5 * time.Second
	// DefaultHealthyWithin is how recent the last successful read must be
	// for /healthz to answer 200.
	DefaultHealthyWithin = 10 * time.Second
	// DefaultHistory is how many changes the server keeps per lease.
	DefaultHistory = 200
	// NotifyDelay is how long after a release or takeover is announced the
	// server reads the store (or Interval/5, when that is shorter).
	NotifyDelay = 100 * time.Millisecond
)

// Limits of what one page and one scrape show.
const (
	// MaxRows is the most leases the page's table lists and /metrics
	// reports one by one (the first by name); the counts cover them all.
	MaxRows = 1000
	// MaxTimelineLeases is the most leases the timeline draws: those that
	// changed most recently.
	MaxTimelineLeases = 20
	// MaxRecentChanges is the most changes the page's history lists.
	MaxRecentChanges = 50
	// MaxStoreEvents is the most events of the store's own history
	// ([store.Historian]) each read fetches, lists and draws.
	MaxStoreEvents = 50
)

// Config configures a [Server]. Zero values mean the documented defaults.
type Config struct {
	// Store is the store to show. Required.
	Store store.Store
	// Names are the leases to watch. Empty: every lease, which needs a
	// store that implements [store.Lister].
	Names []string
	// Registry is the fleet registry whose agents the page lists; nil for
	// none (only PostgreSQL stores have one).
	Registry *registry.Registry
	// StoreDisplay names the store on the page, e.g. its URL with the
	// password masked. Default: "the store".
	StoreDisplay string
	// Interval is the time between two reads of the store (default
	// [DefaultInterval]). A store that announces releases and takeovers
	// ([store.Notifier]) is also read [NotifyDelay] after one is announced
	// (a burst of announcements costs one read).
	Interval time.Duration
	// ReadTimeout bounds one read of the store (default
	// [DefaultReadTimeout]).
	ReadTimeout time.Duration
	// HealthyWithin is how old the last successful read may be for
	// /healthz to answer 200 (default [DefaultHealthyWithin]); it must be
	// greater than Interval.
	HealthyWithin time.Duration
	// History is how many changes of holder, token or state the server
	// keeps per lease, in memory (default [DefaultHistory]).
	History int
	// Hidden, when set, names the leases left out of the list of every
	// lease (when Names is empty): the page, the timeline and /metrics do
	// not show them. Named in Names, a lease shows whatever Hidden says.
	Hidden func(name string) bool
}

// Server reads a store at intervals and serves what it saw over HTTP.
type Server struct {
	cfg      Config
	lister   store.Lister // nil when Names are read one by one
	registry *prometheus.Registry
	reads    *prometheus.CounterVec

	readMu sync.Mutex // serialises reads, so changes are recorded in order

	mu      sync.Mutex
	started time.Time // the first read's start
	last    *snapshot // the last successful read
	lastErr error     // the last read's error, nil when it succeeded
	errAt   time.Time // when lastErr was met
	history map[string]*leaseHistory
	recent  []namedChange // the latest changes of every lease, oldest first, at most MaxRecentChanges
}

// namedChange is a change and the lease it happened to.
type namedChange struct {
	name string
	c    change
}

// snapshot is one successful read.
type snapshot struct {
	at        time.Time // when the read returned, by this host's clock
	took      time.Duration
	leases    []store.Record
	agents    []registry.Agent
	agentsErr error
	// events are the store's latest recorded events, oldest first, when
	// it is a [store.Historian].
	events    []store.HistoryEvent
	eventsErr error
}

// change is one observed change of a lease's holder, token or state.
type change struct {
	at     time.Time // when this server saw it, by this host's clock
	state  store.State
	holder store.Holder
	token  store.Token
	first  bool // the lease's first sighting by this server
}

// same reports whether c and d show the same tenure in the same state.
func (c change) same(d change) bool {
	return c.state == d.state && c.holder == d.holder && c.token == d.token
}

type leaseHistory struct {
	changes []change // oldest first, at most Config.History
}

// New validates cfg and returns a server. It does no I/O: call
// [Server.Refresh] or [Server.Run] to read the store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: serve: no store", store.ErrInvalid)
	}
	for _, n := range cfg.Names {
		if err := store.ValidateName(n); err != nil {
			return nil, err
		}
	}
	cfg.Names = slices.Clone(cfg.Names)
	if cfg.StoreDisplay == "" {
		cfg.StoreDisplay = "the store"
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.HealthyWithin == 0 {
		cfg.HealthyWithin = DefaultHealthyWithin
	}
	if cfg.History == 0 {
		cfg.History = DefaultHistory
	}
	switch {
	case cfg.Interval < 0 || cfg.ReadTimeout < 0 || cfg.HealthyWithin < 0 || cfg.History < 0:
		return nil, fmt.Errorf("%w: serve: Interval (%s), ReadTimeout (%s), HealthyWithin (%s) and History (%d) must not be negative",
			store.ErrInvalid, cfg.Interval, cfg.ReadTimeout, cfg.HealthyWithin, cfg.History)
	case cfg.HealthyWithin <= cfg.Interval:
		return nil, fmt.Errorf("%w: serve: HealthyWithin (%s) must be greater than Interval (%s)", store.ErrInvalid, cfg.HealthyWithin, cfg.Interval)
	}
	s := &Server{cfg: cfg, history: map[string]*leaseHistory{}}
	if len(cfg.Names) == 0 {
		l, ok := cfg.Store.(store.Lister)
		if !ok {
			return nil, fmt.Errorf("%w: serve: this store cannot list its leases; name the leases to show", store.ErrInvalid)
		}
		s.lister = l
	}
	if err := s.initMetrics(); err != nil {
		return nil, err
	}
	return s, nil
}

// Run reads the store every Interval, and [NotifyDelay] after the store
// announces a release or takeover, until ctx is done; then it returns nil, after every
// goroutine it started has exited. A failed read is kept for the page and
// /healthz; Run goes on.
func (s *Server) Run(ctx context.Context) error {
	wake := make(chan struct{}, 1)
	if n, ok := s.cfg.Store.(store.Notifier); ok {
		lctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() {
			cancel()
			wg.Wait()
		}()
		wg.Go(func() {
			// Listen returns only when lctx is done or the store is
			// closed; notifications only make reads come sooner.
			_ = n.Listen(lctx, func(store.Notice) {
				select {
				case wake <- struct{}{}:
				default:
				}
			})
		})
	}
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		_ = s.Refresh(ctx) // kept for the page and /healthz
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
			// Let a burst of announcements cost one read.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(min(s.cfg.Interval/5, NotifyDelay)):
			}
		}
	}
}

// Refresh reads the store once, records what changed, and returns the
// read's error. Reads never overlap: a Refresh called while another runs
// (Run's) waits for it.
func (s *Server) Refresh(ctx context.Context) error {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	begin := time.Now()
	s.mu.Lock()
	if s.started.IsZero() {
		s.started = begin
	}
	s.mu.Unlock()
	leases, err := s.readLeases(rctx)
	if err != nil {
		s.reads.WithLabelValues("error").Inc()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.lastErr, s.errAt = err, time.Now()
		return err
	}
	snap := &snapshot{leases: leases}
	if s.cfg.Registry != nil {
		snap.agents, snap.agentsErr = s.cfg.Registry.Agents(rctx)
	}
	if h, ok := s.cfg.Store.(store.Historian); ok {
		snap.events, snap.eventsErr = h.History(rctx, store.HistoryParams{Limit: MaxStoreEvents})
	}
	snap.at = time.Now()
	snap.took = snap.at.Sub(begin)
	s.reads.WithLabelValues("ok").Inc()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.lastErr = snap, nil
	s.observe(snap)
	return nil
}

// readLeases lists every lease, or gets the named ones.
func (s *Server) readLeases(ctx context.Context) ([]store.Record, error) {
	if s.lister != nil {
		recs, err := s.lister.List(ctx)
		if s.cfg.Hidden != nil {
			recs = slices.DeleteFunc(recs, func(r store.Record) bool { return s.cfg.Hidden(r.Name) })
		}
		return recs, err
	}
	recs := make([]store.Record, 0, len(s.cfg.Names))
	for _, n := range s.cfg.Names {
		r, err := s.cfg.Store.Get(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			r = store.Record{Grant: store.Grant{Name: n}}
		} else if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// observe records the changes snap shows against the history; s.mu is
// held.
func (s *Server) observe(snap *snapshot) {
	seen := make(map[string]struct{}, len(snap.leases))
	for _, r := range snap.leases {
		seen[r.Name] = struct{}{}
		c := change{at: snap.at, state: r.State, holder: r.Holder, token: r.Token}
		h := s.history[r.Name]
		switch {
		case h == nil:
			c.first = true
			h = &leaseHistory{}
			s.history[r.Name] = h
		case h.changes[len(h.changes)-1].same(c):
			continue
		}
		h.changes = append(h.changes, c)
		if over := len(h.changes) - s.cfg.History; over > 0 {
			h.changes = slices.Delete(h.changes, 0, over)
		}
		s.recent = append(s.recent, namedChange{r.Name, c})
	}
	if over := len(s.recent) - MaxRecentChanges; over > 0 {
		s.recent = slices.Delete(s.recent, 0, over)
	}
	for name := range s.history {
		if _, ok := seen[name]; !ok {
			delete(s.history, name)
		}
	}
}

// health says whether the store answered recently enough, and why not.
func (s *Server) health(now time.Time) (ok bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lastErr != nil:
		return false, fmt.Sprintf("the last read of %s failed %s ago: %v", s.cfg.StoreDisplay, ago(now, s.errAt), s.lastErr)
	case s.last == nil:
		return false, fmt.Sprintf("%s has not been read yet", s.cfg.StoreDisplay)
	case now.Sub(s.last.at) > s.cfg.HealthyWithin:
		return false, fmt.Sprintf("%s last answered %s ago, more than %s", s.cfg.StoreDisplay, ago(now, s.last.at), s.cfg.HealthyWithin)
	}
	return true, fmt.Sprintf("%s answered %s ago in %s", s.cfg.StoreDisplay, ago(now, s.last.at), took(s.last.took))
}

// Handler serves the status page at /, its stylesheet at /style.css,
// Prometheus metrics at /metrics and the health check at /healthz.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.servePage)
	mux.HandleFunc("GET /style.css", serveCSS)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /healthz", s.serveHealth)
	return securityHeaders(mux)
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	ok, reason := s.health(time.Now())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: %s\n", oneLine(reason))
		return
	}
	fmt.Fprintf(w, "ok: %s\n", oneLine(reason))
}

// securityHeaders forbids scripts and framing: the page needs neither.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

// took renders the duration of a read for people.
func took(d time.Duration) string {
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// ago renders the time from then to now for people.
func ago(now, then time.Time) string {
	return now.Sub(then).Round(100 * time.Millisecond).String()
}
