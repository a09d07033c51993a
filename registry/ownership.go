package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
)

// placeAttempts bounds how often Place picks again when the agent it chose
// went stale between the listing and the insert.
const placeAttempts = 3

// Ownership records that a resource pinned to one host belongs to an agent.
type Ownership struct {
	Resource string
	// Agent is the owner as the store saw it at the read.
	Agent Agent
	// CreatedAt is when the resource was placed and UpdatedAt when it was
	// last reassigned (or placed), by the store's clock.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Metadata is the JSON given to [Registry.Place], as jsonb prints it;
	// nil when none was given.
	Metadata json.RawMessage
	// Placed reports that this very [Registry.Place] call created the
	// ownership; false when the resource already had an owner.
	Placed bool
}

// Owner answers who owns resource, by the store's clock, with exactly one
// of three outcomes:
//
//   - the ownership, nil: the owner is alive;
//   - an error matching [ErrNoOwner]: the resource was never placed (or its
//     ownership was removed);
//   - an [*OwnerDeadError] (matching [ErrOwnerDead]): the resource has an
//     owner, and that agent is stale, deregistered or missing. The error
//     carries the agent and its last heartbeat by the store's clock.
//
// A dead owner is never reported as no owner, and the caller must not
// answer [ErrOwnerDead] by placing the resource elsewhere: it lives on that
// host's disk. Wait for the agent to come back, or have an operator call
// [Registry.Reassign].
//
// Owner always asks the store; it serves nothing from a cache.
func (r *Registry) Owner(ctx context.Context, resource string) (Ownership, error) {
	const op = "get owner"
	if err := ctx.Err(); err != nil {
		return Ownership{}, notAttempted(op, err)
	}
	if err := ValidateResource(resource); err != nil {
		return Ownership{}, fmt.Errorf("registry: get owner: %w", err)
	}
	return r.owner(ctx, r.pool, resource)
}

// querier is what owner needs: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (r *Registry) owner(ctx context.Context, q querier, resource string) (Ownership, error) {
	op := fmt.Sprintf("get owner of resource %q", resource)
	rows, err := q.Query(ctx, r.ownerSQL, resource)
	if err != nil {
		return Ownership{}, interpretError(op, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Ownership{}, interpretError(op, err)
		}
		return Ownership{}, fmt.Errorf("registry: resource %q: %w; place it with Registry.Place", resource, ErrNoOwner)
	}
	var (
		o        = Ownership{}
		agentID  string
		metadata *string
		s        agentScan
		owned    int64
	)
	dest := append([]any{&o.Resource, &agentID, &o.CreatedAt, &o.UpdatedAt, &metadata}, s.dest()...)
	if err := rows.Scan(append(dest, &owned)...); err != nil {
		return Ownership{}, interpretError(op, err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Ownership{}, interpretError(op, err)
	}
	if metadata != nil {
		o.Metadata = json.RawMessage(*metadata)
	}
	a, ok, err := s.agent()
	if err != nil {
		return Ownership{}, fmt.Errorf("registry: %s: %w", op, err)
	}
	if !ok {
		return Ownership{}, &OwnerDeadError{Resource: resource, Agent: agentID}
	}
	if !a.Alive {
		return Ownership{}, &OwnerDeadError{
			Resource: resource, Agent: a.ID, LastHeartbeat: a.LastHeartbeat, Age: a.HeartbeatAge, Deregistered: a.Deregistered,
		}
	}
	o.Agent = a
	return o, nil
}

// Policy chooses the agent a resource is placed on. candidates are the
// agents alive by the store's clock, ordered by id, each with the number of
// resources it owns; there is at least one. It returns the chosen agent's
// id, which must be one of the candidates, or an error, which
// [Registry.Place] returns. It must not block for long: the candidates age
// while it runs (Place checks liveness again when it inserts).
type Policy func(resource string, candidates []Agent) (agentID string, err error)

// LeastOwned is the default [Policy]: the candidate owning the fewest
// resources; ties are broken by rendezvous hashing of resource and agent
// id, so equal agents share new resources evenly and every caller breaks a
// tie the same way.
func LeastOwned(resource string, candidates []Agent) (string, error) {
	if len(candidates) == 0 {
		return "", fmt.Errorf("registry: least owned: %w", ErrNoAgents)
	}
	best := candidates[0]
	bestHash := rendezvous(resource, best.ID)
	for _, c := range candidates[1:] {
		h := rendezvous(resource, c.ID)
		if c.Owned < best.Owned || (c.Owned == best.Owned && h > bestHash) {
			best, bestHash = c, h
		}
	}
	return best.ID, nil
}

func rendezvous(resource, agent string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(resource)) // hash.Hash writes never fail
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(agent))
	return h.Sum64()
}

// PlaceParams says how [Registry.Place] chooses and what it records.
type PlaceParams struct {
	// Policy chooses among the live agents. Nil means [LeastOwned].
	Policy Policy
	// Metadata is free-form JSON stored with the ownership; empty means
	// none. At most [MaxJSONLen] bytes. It is written only by the call that
	// creates the ownership.
	Metadata json.RawMessage
}

// Place returns the owner of resource, placing it first when it has none.
//
//   - The resource has a live owner: that ownership (Placed false). Never a
//     second one.
//   - Its owner is dead: the [*OwnerDeadError] of [Registry.Owner], and
//     nothing is placed. Only [Registry.Reassign] moves it.
//   - It has no owner: p.Policy chooses among the agents alive by the
//     store's clock, and the ownership is inserted only if the resource is
//     still unowned and the chosen agent still alive at that instant (INSERT
//     … ON CONFLICT DO NOTHING). Then Place reads the ownership again: every
//     concurrent Place of one resource, in any process, returns the same
//     owner, whichever inserted it (Placed true for that one only).
//   - No agent is alive: an error matching [ErrNoAgents].
//
// An error matching [store.ErrUnavailable] means the ownership may have
// been created; call Place (or Owner) again to learn it.
func (r *Registry) Place(ctx context.Context, resource string, p PlaceParams) (Ownership, error) {
	const op = "place"
	if err := ctx.Err(); err != nil {
		return Ownership{}, notAttempted(op, err)
	}
	if err := ValidateResource(resource); err != nil {
		return Ownership{}, fmt.Errorf("registry: place: %w", err)
	}
	metadata, err := jsonArg("metadata", p.Metadata)
	if err != nil {
		return Ownership{}, fmt.Errorf("registry: place resource %q: %w", resource, err)
	}
	policy := p.Policy
	if policy == nil {
		policy = LeastOwned
	}
	for range placeAttempts {
		o, err := r.owner(ctx, r.pool, resource)
		if !errors.Is(err, ErrNoOwner) {
			return o, err // a live owner, a dead owner, or a failure
		}
		agents, err := r.Agents(ctx)
		if err != nil {
			return Ownership{}, err
		}
		live := slices.DeleteFunc(agents, func(a Agent) bool { return !a.Alive })
		if len(live) == 0 {
			return Ownership{}, fmt.Errorf("registry: place resource %q: %w: register an agent, or wait for one to heartbeat", resource, ErrNoAgents)
		}
		chosen, err := policy(resource, slices.Clone(live))
		if err != nil {
			return Ownership{}, fmt.Errorf("registry: place resource %q: policy: %w", resource, err)
		}
		if !slices.ContainsFunc(live, func(a Agent) bool { return a.ID == chosen }) {
			return Ownership{}, fmt.Errorf("registry: place resource %q: %w: the policy chose %q, which is not one of the %d live candidates",
				resource, store.ErrInvalid, chosen, len(live))
		}
		tag, err := r.pool.Exec(ctx, r.placeSQL, resource, chosen, metadata)
		if err != nil {
			return Ownership{}, interpretError(fmt.Sprintf("place resource %q on agent %q", resource, chosen), err)
		}
		o, err = r.owner(ctx, r.pool, resource)
		if tag.RowsAffected() == 1 {
			o.Placed = err == nil
			return o, err
		}
		if !errors.Is(err, ErrNoOwner) {
			return o, err // someone else placed it first
		}
		// Not inserted, and still no owner: the chosen agent went stale
		// between the listing and the insert. Choose again.
	}
	return Ownership{}, fmt.Errorf("registry: place resource %q: %w: the chosen agent went stale %d times in a row; try again",
		resource, store.ErrUnavailable, placeAttempts)
}

// ReassignParams asks [Registry.Reassign] to move a resource.
type ReassignParams struct {
	Resource string
	// From is the owner the operator saw: the move happens only if the
	// resource is still owned by From (a compare-and-set).
	From string
	// To is the new owner; it must be alive by the store's clock.
	To string
	// Reason says why, for the history and the log. Required; at most
	// [MaxReasonLen] bytes.
	Reason string
}

func (p ReassignParams) validate() error {
	if err := ValidateResource(p.Resource); err != nil {
		return err
	}
	if err := store.ValidateText("reassign from agent", p.From, MaxAgentIDLen); err != nil {
		return err
	}
	if err := store.ValidateText("reassign to agent", p.To, MaxAgentIDLen); err != nil {
		return err
	}
	if p.From == p.To {
		return fmt.Errorf("%w: resource %q would be reassigned from agent %q to itself", store.ErrInvalid, p.Resource, p.From)
	}
	return store.ValidateText("reassign reason", p.Reason, MaxReasonLen)
}

// Reassign moves a resource from one agent to another: the operator's
// answer to [ErrOwnerDead] (a host that will not come back), or a planned
// move. It is the only way ownership moves. In one transaction it locks the
// ownership, checks that From still owns it ([ErrOwnerChanged] otherwise,
// [ErrNoOwner] when nothing does) and that To is alive by the store's clock
// ([*AgentDeadError] or [ErrUnknownAgent] otherwise), moves it, and
// records the move with its reason and the old owner's last heartbeat in the
// reassignments table; it is also logged at Warn on [Config.Logger]. It
// returns the new ownership.
func (r *Registry) Reassign(ctx context.Context, p ReassignParams) (Ownership, error) {
	const op = "reassign"
	if err := ctx.Err(); err != nil {
		return Ownership{}, notAttempted(op, err)
	}
	if err := p.validate(); err != nil {
		return Ownership{}, fmt.Errorf("registry: reassign: %w", err)
	}
	qop := fmt.Sprintf("reassign resource %q from agent %q to agent %q", p.Resource, p.From, p.To)
	var (
		o        Ownership
		wasAlive bool
	)
	err := r.ownershipTx(ctx, qop, p.Resource, p.From, func(tx pgx.Tx, fromAlive bool, fromHeartbeat *time.Time) error {
		wasAlive = fromAlive
		rows, err := tx.Query(ctx, r.agentSQL, p.To)
		if err != nil {
			return interpretError(qop, err)
		}
		to, err := scanAgents(rows)
		if err != nil {
			return interpretError(qop, err)
		}
		if len(to) == 0 {
			return fmt.Errorf("registry: %s: agent %q: %w", qop, p.To, ErrUnknownAgent)
		}
		if !to[0].Alive {
			return fmt.Errorf("registry: %s: choose a live agent: %w", qop, to[0].deadError())
		}
		var id int64
		if err := tx.QueryRow(ctx, r.reassignSQL, p.Resource, p.To, p.From, p.Reason, fromAlive, fromHeartbeat).Scan(&id); err != nil {
			return interpretError(qop, err)
		}
		if o, err = r.owner(ctx, tx, p.Resource); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Ownership{}, err
	}
	r.log.Warn("registry: resource reassigned",
		slog.String("resource", p.Resource), slog.String("from", p.From), slog.String("to", p.To),
		slog.String("reason", p.Reason), slog.Bool("from_alive", wasAlive))
	return o, nil
}

// RemoveParams asks [Registry.Remove] to forget a resource's ownership.
type RemoveParams struct {
	Resource string
	// Agent is the owner the caller saw: the ownership is removed only if
	// Agent still owns it (a compare-and-set).
	Agent string
	// Reason says why, for the history and the log ("sandbox deleted").
	// Required; at most [MaxReasonLen] bytes.
	Reason string
}

func (p RemoveParams) validate() error {
	if err := ValidateResource(p.Resource); err != nil {
		return err
	}
	if err := ValidateAgentID(p.Agent); err != nil {
		return err
	}
	return store.ValidateText("remove reason", p.Reason, MaxReasonLen)
}

// Remove forgets the ownership of a resource that no longer exists (a
// deleted sandbox, a destroyed volume), if p.Agent still owns it
// ([ErrOwnerChanged] otherwise, [ErrNoOwner] when nothing does). It is
// recorded in the reassignments table with an empty new agent, and logged.
//
// Removing the ownership of a resource that still exists on a dead host and
// placing it again is exactly the mistake [ErrOwnerDead] exists to prevent:
// use [Registry.Reassign] for that.
func (r *Registry) Remove(ctx context.Context, p RemoveParams) error {
	const op = "remove"
	if err := ctx.Err(); err != nil {
		return notAttempted(op, err)
	}
	if err := p.validate(); err != nil {
		return fmt.Errorf("registry: remove: %w", err)
	}
	qop := fmt.Sprintf("remove ownership of resource %q by agent %q", p.Resource, p.Agent)
	var alive bool
	err := r.ownershipTx(ctx, qop, p.Resource, p.Agent, func(tx pgx.Tx, fromAlive bool, fromHeartbeat *time.Time) error {
		alive = fromAlive
		var id int64
		if err := tx.QueryRow(ctx, r.removeSQL, p.Resource, p.Agent, p.Reason, fromAlive, fromHeartbeat).Scan(&id); err != nil {
			return interpretError(qop, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.log.Warn("registry: resource ownership removed",
		slog.String("resource", p.Resource), slog.String("agent", p.Agent), slog.String("reason", p.Reason),
		slog.Bool("agent_alive", alive))
	return nil
}

// ownershipTx runs f in a transaction in which resource's ownership is
// locked and known to belong to agent; f gets whether that agent is alive
// and its last heartbeat.
func (r *Registry) ownershipTx(ctx context.Context, op, resource, agent string,
	f func(tx pgx.Tx, alive bool, heartbeat *time.Time) error,
) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return interpretError(op, err)
	}
	defer func() {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // After Commit this is a no-op; after a failure the failure is the error to report.
	}()
	var (
		current   string
		alive     bool
		heartbeat *time.Time
	)
	err = tx.QueryRow(ctx, r.lockOwnerSQL, resource).Scan(&current, &alive, &heartbeat)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("registry: %s: resource %q: %w", op, resource, ErrNoOwner)
	}
	if err != nil {
		return interpretError(op, err)
	}
	if current != agent {
		return fmt.Errorf("registry: %s: %w: resource %q is owned by agent %q now; look again and decide again",
			op, ErrOwnerChanged, resource, current)
	}
	if err := f(tx, alive, heartbeat); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return interpretError(op, err)
	}
	return nil
}

// Reassignment is one entry of a resource's ownership history.
type Reassignment struct {
	ID       int64
	Resource string
	From     string
	// To is the new owner; empty for a [Registry.Remove].
	To     string
	Reason string
	// FromAlive and FromLastHeartbeat describe the old owner at the move, by
	// the store's clock; FromLastHeartbeat is zero if its row was missing.
	FromAlive         bool
	FromLastHeartbeat time.Time
	// At is when it happened, by the store's clock.
	At time.Time
}

// Reassignments returns the reassignments and removals of resource, oldest
// first.
func (r *Registry) Reassignments(ctx context.Context, resource string) ([]Reassignment, error) {
	const op = "list reassignments"
	if err := ctx.Err(); err != nil {
		return nil, notAttempted(op, err)
	}
	if err := ValidateResource(resource); err != nil {
		return nil, fmt.Errorf("registry: list reassignments: %w", err)
	}
	qop := fmt.Sprintf("list reassignments of resource %q", resource)
	rows, err := r.pool.Query(ctx, r.reassignmentsSQL, resource)
	if err != nil {
		return nil, interpretError(qop, err)
	}
	defer rows.Close()
	out := []Reassignment{}
	for rows.Next() {
		var (
			x  Reassignment
			hb *time.Time
		)
		if err := rows.Scan(&x.ID, &x.Resource, &x.From, &x.To, &x.Reason, &x.FromAlive, &hb, &x.At); err != nil {
			return nil, interpretError(qop, err)
		}
		x.FromLastHeartbeat = deref(hb)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(qop, err)
	}
	return out, nil
}
