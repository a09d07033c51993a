package registry

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-dev/tenure/internal/identity"
	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/store"
)

//go:embed queries/*.sql
var queryFS embed.FS

// registerAttempts bounds how often Register repeats its statement when a
// concurrent first insert of the same id made it return nothing (see
// queries/register.sql). The second attempt always sees that row.
const registerAttempts = 3

// maxPending bounds how many heartbeats of unknown outcome a [Registration]
// remembers.
const maxPending = 8

// Registry is the fleet registry over PostgreSQL: agents, their heartbeats
// and the ownership of resources pinned to one agent. It is safe for
// concurrent use and keeps no state between calls: every liveness answer is
// the store's, by its clock. Create it with [New] and its schema with
// [Registry.Migrate] (or `tenure migrate`).
type Registry struct {
	pool *pgxpool.Pool
	obj  Objects
	cfg  Config // normalized
	log  *slog.Logger
	// render substitutes the quoted names into SQL.
	render func(sql string) string

	registerSQL, heartbeatSQL, conflictSQL, deregisterSQL  string
	agentSQL, agentsSQL, ownerSQL, placeSQL                string
	lockOwnerSQL, reassignSQL, reassignmentsSQL, removeSQL string
}

// New returns a Registry using pool, with the objects and timings cfg
// names. It does not touch the database: call [Registry.Migrate] once (as
// the schema's owner) before the first use, or calls fail with
// [store.ErrNotMigrated]. The registry does not own pool.
func New(pool *pgxpool.Pool, cfg Config) (*Registry, error) {
	if pool == nil {
		return nil, fmt.Errorf("registry: %w: pool is nil; create one with pgxpool.New", store.ErrInvalid)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	render := obj.renderer()
	r := &Registry{pool: pool, obj: obj, cfg: cfg, log: log, render: render}
	if err := pgkit.Queries("registry", queryFS, "queries", render, map[string]*string{
		"register.sql":      &r.registerSQL,
		"heartbeat.sql":     &r.heartbeatSQL,
		"conflict.sql":      &r.conflictSQL,
		"deregister.sql":    &r.deregisterSQL,
		"agent.sql":         &r.agentSQL,
		"agents.sql":        &r.agentsSQL,
		"owner.sql":         &r.ownerSQL,
		"place.sql":         &r.placeSQL,
		"lock_owner.sql":    &r.lockOwnerSQL,
		"reassign.sql":      &r.reassignSQL,
		"reassignments.sql": &r.reassignmentsSQL,
		"remove.sql":        &r.removeSQL,
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// Objects returns the names of the registry's database objects.
func (r *Registry) Objects() Objects { return r.obj }

// HeartbeatInterval returns how often agents registered by r heartbeat; see
// [Config.HeartbeatInterval].
func (r *Registry) HeartbeatInterval() time.Duration { return r.cfg.HeartbeatInterval }

// StaleAfter returns how old a heartbeat may get before an agent registered
// by r is stale; see [Config.StaleAfter].
func (r *Registry) StaleAfter() time.Duration { return r.cfg.StaleAfter }

// Agent is an agent as the store saw it at one read, by the store's clock.
type Agent struct {
	ID string
	// Instance is the process currently registered under ID; Seq is its
	// heartbeat chain's position.
	Instance string
	Seq      int64
	Address  string
	Labels   map[string]string
	// Capacity is the free-form JSON the agent registered with, as
	// PostgreSQL's jsonb prints it (keys reordered, spaces normalised); nil
	// when it registered none.
	Capacity json.RawMessage
	// HeartbeatInterval and StaleAfter are the timings the agent declared
	// when it registered; every reader judges it by them.
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	// RegisteredAt is when the current instance registered, by the store's
	// clock.
	RegisteredAt time.Time
	// LastHeartbeat is the last heartbeat by the store's clock, and
	// HeartbeatAge its age at the read, by the same clock.
	LastHeartbeat time.Time
	HeartbeatAge  time.Duration
	// LastGap is the time between the last two heartbeats, by the store's
	// clock: a slow heartbeat shows here.
	LastGap time.Duration
	// Alive reports that the agent is registered and its heartbeat is
	// younger than StaleAfter, by the store's clock, at the read.
	Alive bool
	// Deregistered reports that the agent left cleanly.
	Deregistered bool
	// Owned is the number of resources the agent owns (zero where a call's
	// documentation says it does not count them).
	Owned int64
	// Conflicts counts heartbeats refused under this id (another instance,
	// or a clone of one); LastConflictAt and LastConflictInstance describe
	// the latest.
	Conflicts            int64
	LastConflictAt       time.Time
	LastConflictInstance string
}

// remaining is how long, from the read, until a is stale by the store's
// clock if it does not heartbeat again; zero when it is not alive.
func (a Agent) remaining() time.Duration {
	if !a.Alive {
		return 0
	}
	return max(0, a.StaleAfter-a.HeartbeatAge)
}

func (a Agent) deadError() *AgentDeadError {
	return &AgentDeadError{Agent: a.ID, LastHeartbeat: a.LastHeartbeat, Age: a.HeartbeatAge, Deregistered: a.Deregistered}
}

// RegisterParams describes an agent joining the fleet.
type RegisterParams struct {
	// ID names the agent (usually its host); it is what ownerships point
	// at. At most [MaxAgentIDLen] bytes.
	ID string
	// Address is where the agent is reached. Required; at most
	// [MaxAddressLen] bytes.
	Address string
	// Labels are free key/value pairs for placement policies: at most
	// [MaxLabels], keys of ASCII letters, digits and . _ / - up to
	// [MaxLabelKeyLen] bytes, values up to [MaxLabelValueLen] bytes.
	Labels map[string]string
	// Capacity is free-form JSON (say {"cpu": 64, "disk_gb": 2000}) for
	// placement policies; empty means none. At most [MaxJSONLen] bytes.
	Capacity json.RawMessage
	// Instance identifies this process (promise P5). Leave it empty: a
	// fresh one is made. Set it only to retry a Register whose outcome was
	// unknown (an error matching [store.ErrUnavailable]) with the instance
	// of that attempt; never persist it across restarts.
	Instance string
}

func (p RegisterParams) validate() error {
	if err := ValidateAgentID(p.ID); err != nil {
		return err
	}
	if err := store.ValidateText("agent address", p.Address, MaxAddressLen); err != nil {
		return err
	}
	if err := validateLabels(p.Labels); err != nil {
		return err
	}
	if p.Instance != "" {
		if err := store.ValidateText("agent instance", p.Instance, store.MaxInstanceLen); err != nil {
			return err
		}
	}
	return nil
}

// Registration is one process's membership of the fleet under an agent id:
// what it heartbeats with. It is a value: [Registry.Heartbeat] returns the
// next one, and the registry keeps none of it, so two processes holding the
// same Registration (a clone) are told apart by the store.
type Registration struct {
	ID       string
	Instance string
	// Seq is the heartbeat chain's position this registration continues.
	Seq int64
	// HeartbeatInterval and StaleAfter are the timings declared at
	// registration.
	HeartbeatInterval time.Duration
	StaleAfter        time.Duration
	// RegisteredAt is when the registration took effect, by the store's
	// clock.
	RegisteredAt time.Time

	// pending holds the nonces of heartbeats sent since Seq whose outcome
	// is unknown, newest last.
	pending []string
	// conflicts is the row's conflict count at the last successful call.
	conflicts int64
}

func (g Registration) validate() error {
	if err := ValidateAgentID(g.ID); err != nil {
		return err
	}
	if err := store.ValidateText("agent instance", g.Instance, store.MaxInstanceLen); err != nil {
		return err
	}
	if g.Seq <= 0 {
		return fmt.Errorf("%w: seq %d of agent %q must be positive; use the Registration that Register returned", store.ErrInvalid, g.Seq, g.ID)
	}
	return nil
}

// withPending returns g remembering one more heartbeat of unknown outcome.
func (g Registration) withPending(nonce string) Registration {
	p := append(append([]string(nil), g.pending...), nonce)
	if len(p) > maxPending {
		p = p[len(p)-maxPending:]
	}
	g.pending = p
	return g
}

// Register makes this process agent p.ID, with a fresh instance, and
// records a first heartbeat by the store's clock. The rules, judged by the
// store's clock in one statement:
//
//   - no row for p.ID: the agent is inserted;
//   - the row's agent is deregistered or stale: this process takes the row
//     over (the ownerships of p.ID stay: they belong to the id, that is,
//     the host), and the old instance's next heartbeat fails with an
//     [IdentityConflictError];
//   - the row belongs to p.Instance (a retry): it is refreshed;
//   - the row belongs to another instance that is alive: nothing changes
//     and Register returns an [IdentityInUseError] saying when that instance
//     would be stale. A restarted agent therefore waits until its previous
//     instance is stale (or deregistered it on the way out), and two hosts
//     configured with one id never overwrite each other.
//
// An error matching [store.ErrUnavailable] means it may have been applied:
// retry with p.Instance set to the failed attempt's instance, which
// [RegisterInstance] makes up front.
func (r *Registry) Register(ctx context.Context, p RegisterParams) (Registration, error) {
	const op = "register"
	if err := ctx.Err(); err != nil {
		return Registration{}, notAttempted(op, err)
	}
	if err := p.validate(); err != nil {
		return Registration{}, fmt.Errorf("registry: register: %w", err)
	}
	capacity, err := jsonArg("capacity", p.Capacity)
	if err != nil {
		return Registration{}, fmt.Errorf("registry: register agent %q: %w", p.ID, err)
	}
	labels := p.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	labelsJSON, err := json.Marshal(labels)
	if err != nil {
		return Registration{}, fmt.Errorf("registry: register agent %q: %w: labels: %w", p.ID, store.ErrInvalid, err)
	}
	instance := p.Instance
	if instance == "" {
		instance = identity.New()
	}
	nonce := identity.New()
	qop := fmt.Sprintf("register agent %q", p.ID)
	for range registerAttempts {
		var (
			registered          bool
			g                   = Registration{ID: p.ID}
			heartbeatAt         time.Time
			ageUS, staleAfterUS int64
		)
		err := r.pool.QueryRow(ctx, r.registerSQL, p.ID, instance, nonce, p.Address, string(labelsJSON), capacity,
			r.cfg.HeartbeatInterval.Microseconds(), r.cfg.StaleAfter.Microseconds(),
		).Scan(&registered, &g.Instance, &g.Seq, &g.RegisteredAt, &heartbeatAt, &ageUS, &staleAfterUS, &g.conflicts)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return Registration{}, interpretError(qop, err)
		}
		if !registered {
			age := usec(ageUS)
			return Registration{}, &IdentityInUseError{
				Agent: p.ID, Instance: g.Instance, LastHeartbeat: heartbeatAt, Age: age,
				Remaining: max(0, usec(staleAfterUS)-age),
			}
		}
		g.HeartbeatInterval, g.StaleAfter = r.cfg.HeartbeatInterval, r.cfg.StaleAfter
		return g, nil
	}
	return Registration{}, fmt.Errorf("registry: %s: %w: the agent row changed under %d attempts in a row; try again",
		qop, store.ErrUnavailable, registerAttempts)
}

// RegisterInstance returns a fresh instance id for [RegisterParams.Instance]
// (promise P5: made in memory, never read from disk). Register makes one by
// itself; make one up front only to be able to retry a Register whose
// outcome was unknown.
func RegisterInstance() string { return identity.New() }

// Beat is the outcome of a successful [Registry.Heartbeat].
type Beat struct {
	// Registration is what to heartbeat with next.
	Registration Registration
	// At is the heartbeat's time by the store's clock.
	At time.Time
	// Gap is the time since the previous heartbeat, by the store's clock.
	Gap time.Duration
	// Revived reports that Gap reached StaleAfter: the agent was stale (dead
	// to every reader) for a while before this heartbeat. Its resources may
	// have been reassigned meanwhile; check them.
	Revived bool
	// Conflicts counts heartbeats ever refused under this agent id, and
	// NewConflicts those since the registration's previous heartbeat (or its
	// registration): another process tried to heartbeat as this agent, an
	// older instance or a clone. [Heartbeater] reports them.
	Conflicts            int64
	NewConflicts         int64
	LastConflictAt       time.Time
	LastConflictInstance string
}

// Heartbeat records that g's agent is alive now, by the store's clock: a
// compare-and-set on (id, instance, seq) that advances seq. It returns the
// [Beat] with the next [Registration].
//
// When the row no longer continues g's chain, nothing is extended, the
// refusal is counted on the row (so the winning instance hears of it), and
// Heartbeat returns an [IdentityConflictError]: another instance registered
// under the id (this one was stale, or its identity was inherited), or a
// process with this very Registration (a clone) heartbeated first. The
// caller must stop acting as the agent.
//
// On an error matching [store.ErrUnavailable] the heartbeat may have been
// applied; the returned Beat's Registration remembers it, and heartbeating
// with that one recognises the lost reply instead of reporting a conflict.
// On other errors use g again.
func (r *Registry) Heartbeat(ctx context.Context, g Registration) (Beat, error) {
	return r.heartbeat(ctx, g, identity.New())
}

// heartbeat is Heartbeat with the heartbeat's nonce given.
func (r *Registry) heartbeat(ctx context.Context, g Registration, nonce string) (Beat, error) {
	const op = "heartbeat"
	if err := ctx.Err(); err != nil {
		return Beat{Registration: g}, notAttempted(op, err)
	}
	if err := g.validate(); err != nil {
		return Beat{Registration: g}, fmt.Errorf("registry: heartbeat: %w", err)
	}
	pending := g.pending
	if pending == nil {
		pending = []string{}
	}
	var (
		b              = Beat{Registration: g}
		gapUS, staleUS int64
		lastConflict   *time.Time
	)
	err := r.pool.QueryRow(ctx, r.heartbeatSQL, g.ID, g.Instance, g.Seq, nonce, pending).
		Scan(&b.Registration.Seq, &b.At, &gapUS, &staleUS, &b.Conflicts, &lastConflict, &b.LastConflictInstance)
	if errors.Is(err, pgx.ErrNoRows) {
		return Beat{Registration: g}, r.conflict(ctx, "heartbeat", g)
	}
	if err != nil {
		err = interpretError(fmt.Sprintf("heartbeat of agent %q", g.ID), err)
		if errors.Is(err, store.ErrUnavailable) {
			return Beat{Registration: g.withPending(nonce)}, err
		}
		return Beat{Registration: g}, err
	}
	b.Registration.pending = nil
	b.Registration.conflicts = b.Conflicts
	b.NewConflicts = max(0, b.Conflicts-g.conflicts)
	b.Gap = usec(gapUS)
	b.Revived = gapUS >= staleUS
	if lastConflict != nil {
		b.LastConflictAt = *lastConflict
	}
	if b.Revived {
		r.log.Warn("registry: agent heartbeated again after being stale; its resources may have been reassigned meanwhile",
			slog.String("agent", g.ID), slog.String("instance", g.Instance), slog.Duration("gap", b.Gap))
	}
	return b, nil
}

// Deregister marks g's agent as gone, now: every reader sees it dead at
// once (its resources answer [ErrOwnerDead]) and the next Register under its
// id succeeds without waiting for staleness. Like a heartbeat it is a
// compare-and-set on (id, instance, seq), failing with an
// [IdentityConflictError] when g lost the chain. The row and the
// ownerships stay.
func (r *Registry) Deregister(ctx context.Context, g Registration) error {
	const op = "deregister"
	if err := ctx.Err(); err != nil {
		return notAttempted(op, err)
	}
	if err := g.validate(); err != nil {
		return fmt.Errorf("registry: deregister: %w", err)
	}
	pending := g.pending
	if pending == nil {
		pending = []string{}
	}
	var seq int64
	err := r.pool.QueryRow(ctx, r.deregisterSQL, g.ID, g.Instance, g.Seq, pending).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return r.conflict(ctx, op, g)
	}
	return interpretError(fmt.Sprintf("deregister agent %q", g.ID), err)
}

// conflict records a refused heartbeat or deregistration of g and returns
// the error describing it.
func (r *Registry) conflict(ctx context.Context, op string, g Registration) error {
	ce := &IdentityConflictError{Agent: g.ID, Instance: g.Instance, Seq: g.Seq}
	var heartbeatAt time.Time
	err := r.pool.QueryRow(ctx, r.conflictSQL, g.ID, g.Instance, g.Seq).
		Scan(&ce.CurrentInstance, &ce.CurrentSeq, &ce.Deregistered, &heartbeatAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// The row is missing (or matches after all, which only a reply
		// lost on this very statement's predecessor could cause): either
		// way this registration cannot go on.
		ce.CurrentInstance, ce.CurrentSeq = "", 0
	case err != nil:
		return interpretError(fmt.Sprintf("%s of agent %q: refused; reading why", op, g.ID), err)
	}
	r.log.Warn("registry: "+op+" refused: identity conflict",
		slog.String("agent", g.ID), slog.String("instance", g.Instance), slog.Int64("seq", g.Seq),
		slog.String("current_instance", ce.CurrentInstance), slog.Int64("current_seq", ce.CurrentSeq),
		slog.Bool("deregistered", ce.Deregistered))
	return ce
}

// Agent returns agent id as the store sees it now (alive or not), with the
// number of resources it owns, or an error matching [ErrUnknownAgent].
func (r *Registry) Agent(ctx context.Context, id string) (Agent, error) {
	const op = "get agent"
	if err := ctx.Err(); err != nil {
		return Agent{}, notAttempted(op, err)
	}
	if err := ValidateAgentID(id); err != nil {
		return Agent{}, fmt.Errorf("registry: get agent: %w", err)
	}
	rows, err := r.pool.Query(ctx, r.agentSQL, id)
	if err != nil {
		return Agent{}, interpretError(fmt.Sprintf("get agent %q", id), err)
	}
	agents, err := scanAgents(rows)
	if err != nil {
		return Agent{}, interpretError(fmt.Sprintf("get agent %q", id), err)
	}
	if len(agents) == 0 {
		return Agent{}, fmt.Errorf("registry: agent %q: %w", id, ErrUnknownAgent)
	}
	return agents[0], nil
}

// Agents returns every agent the store knows, alive or not, ordered by id
// (byte order), each with the number of resources it owns, all read at one
// instant of the store's clock.
func (r *Registry) Agents(ctx context.Context) ([]Agent, error) {
	const op = "list agents"
	if err := ctx.Err(); err != nil {
		return nil, notAttempted(op, err)
	}
	rows, err := r.pool.Query(ctx, r.agentsSQL)
	if err != nil {
		return nil, interpretError(op, err)
	}
	agents, err := scanAgents(rows)
	if err != nil {
		return nil, interpretError(op, err)
	}
	return agents, nil
}

// scanAgents reads rows of {{agent_columns}} followed by an owned count, and
// closes them.
func scanAgents(rows pgx.Rows) ([]Agent, error) {
	defer rows.Close()
	agents := []Agent{}
	for rows.Next() {
		var (
			s     agentScan
			owned int64
		)
		if err := rows.Scan(append(s.dest(), &owned)...); err != nil {
			return nil, err
		}
		a, ok, err := s.agent()
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		a.Owned = owned
		agents = append(agents, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return agents, nil
}

// agentScan receives the columns of agentColumns, each possibly NULL.
type agentScan struct {
	id, instance, address, labels, capacity, lastConflictInstance *string
	seq, intervalUS, staleUS, lastGapUS, conflicts, ageUS         *int64
	registeredAt, heartbeatAt, lastConflictAt                     *time.Time
	deregistered, alive                                           *bool
}

// dest returns the scan destinations in agentColumns order.
func (s *agentScan) dest() []any {
	return []any{
		&s.id, &s.instance, &s.seq, &s.address, &s.labels, &s.capacity,
		&s.intervalUS, &s.staleUS, &s.registeredAt, &s.heartbeatAt,
		&s.deregistered, &s.lastGapUS, &s.conflicts, &s.lastConflictAt, &s.lastConflictInstance,
		&s.alive, &s.ageUS,
	}
}

// agent converts a scanned row; ok is false when the agent row was missing
// (a LEFT JOIN found nothing).
func (s *agentScan) agent() (a Agent, ok bool, err error) {
	if s.id == nil {
		return Agent{}, false, nil
	}
	a = Agent{
		ID:                   *s.id,
		Instance:             deref(s.instance),
		Seq:                  deref(s.seq),
		Address:              deref(s.address),
		HeartbeatInterval:    usec(deref(s.intervalUS)),
		StaleAfter:           usec(deref(s.staleUS)),
		RegisteredAt:         deref(s.registeredAt),
		LastHeartbeat:        deref(s.heartbeatAt),
		HeartbeatAge:         usec(deref(s.ageUS)),
		LastGap:              usec(deref(s.lastGapUS)),
		Alive:                deref(s.alive),
		Deregistered:         deref(s.deregistered),
		Conflicts:            deref(s.conflicts),
		LastConflictAt:       deref(s.lastConflictAt),
		LastConflictInstance: deref(s.lastConflictInstance),
	}
	if s.capacity != nil {
		a.Capacity = json.RawMessage(*s.capacity)
	}
	a.Labels = map[string]string{}
	if s.labels != nil {
		if err := json.Unmarshal([]byte(*s.labels), &a.Labels); err != nil {
			return Agent{}, false, fmt.Errorf("labels of agent %q are not a JSON object of strings: %w", a.ID, err)
		}
	}
	return a, true, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func usec(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
