package registry

import (
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// Sentinel errors of the registry. Errors that carry data are types matching
// one of these; test with [errors.Is] and [errors.As]. Bad input matches
// [store.ErrInvalid], an unreachable store [store.ErrUnavailable] and a
// schema that was never migrated [store.ErrNotMigrated].
var (
	// ErrNoOwner: the resource has no ownership record. It never means
	// that the owner is dead; that is [ErrOwnerDead].
	ErrNoOwner = errors.New("registry: resource has no owner")
	// ErrOwnerDead: the resource's owner is stale or deregistered by the
	// store's clock. See [OwnerDeadError]. Do not answer it by placing the
	// resource elsewhere: the resource lives on that host. Only an operator's
	// [Registry.Reassign] moves it.
	ErrOwnerDead = errors.New("registry: resource owner is dead")
	// ErrAgentDead: the agent is registered but stale or deregistered by
	// the store's clock. See [AgentDeadError].
	ErrAgentDead = errors.New("registry: agent is dead")
	// ErrUnknownAgent: no agent with that id was ever registered.
	ErrUnknownAgent = errors.New("registry: agent is not registered")
	// ErrNoAgents: [Registry.Place] found no live agent to place on.
	ErrNoAgents = errors.New("registry: no live agent")
	// ErrIdentityInUse: [Registry.Register] found another instance alive
	// under the agent id. See [IdentityInUseError].
	ErrIdentityInUse = errors.New("registry: agent id is in use by a live instance")
	// ErrIdentityConflict: a heartbeat or deregistration lost the agent's
	// chain: another instance registered under the id, or a clone of this
	// process heartbeated first. See [IdentityConflictError].
	ErrIdentityConflict = errors.New("registry: agent identity conflict")
	// ErrOwnerChanged: [Registry.Reassign] or [Registry.Remove] named an
	// owner the resource no longer has.
	ErrOwnerChanged = errors.New("registry: resource owner changed")
)

// OwnerDeadError reports a resource whose owner is not alive by the store's
// clock. It matches [ErrOwnerDead].
type OwnerDeadError struct {
	Resource string
	// Agent is the owner's id.
	Agent string
	// LastHeartbeat is the owner's last heartbeat by the store's clock; zero
	// when the agent's row is missing.
	LastHeartbeat time.Time
	// Age is how old LastHeartbeat was at the lookup, by the store's clock.
	Age time.Duration
	// Deregistered reports that the agent left cleanly rather than falling
	// silent.
	Deregistered bool
}

func (e *OwnerDeadError) Error() string {
	switch {
	case e.LastHeartbeat.IsZero():
		return fmt.Sprintf("registry: resource %q is owned by agent %q, which is not registered at all; an operator must reassign it (Registry.Reassign)",
			e.Resource, e.Agent)
	case e.Deregistered:
		return fmt.Sprintf("registry: resource %q is owned by agent %q, which deregistered (last heartbeat %s ago by the store's clock); do not place it elsewhere: wait for the agent or have an operator reassign it",
			e.Resource, e.Agent, e.Age.Round(time.Millisecond))
	}
	return fmt.Sprintf("registry: resource %q is owned by agent %q, whose last heartbeat is %s old by the store's clock; do not place it elsewhere: wait for the agent or have an operator reassign it",
		e.Resource, e.Agent, e.Age.Round(time.Millisecond))
}

// Is matches [ErrOwnerDead].
func (e *OwnerDeadError) Is(target error) bool { return target == ErrOwnerDead }

// AgentDeadError reports an agent that is registered but not alive by the
// store's clock. It matches [ErrAgentDead].
type AgentDeadError struct {
	Agent         string
	LastHeartbeat time.Time     // by the store's clock
	Age           time.Duration // of LastHeartbeat at the lookup, by the store's clock
	Deregistered  bool
}

func (e *AgentDeadError) Error() string {
	if e.Deregistered {
		return fmt.Sprintf("registry: agent %q deregistered (last heartbeat %s ago by the store's clock)",
			e.Agent, e.Age.Round(time.Millisecond))
	}
	return fmt.Sprintf("registry: agent %q is stale: its last heartbeat is %s old by the store's clock",
		e.Agent, e.Age.Round(time.Millisecond))
}

// Is matches [ErrAgentDead].
func (e *AgentDeadError) Is(target error) bool { return target == ErrAgentDead }

// IdentityInUseError reports a registration refused because another
// instance is alive under the agent id. It matches [ErrIdentityInUse].
type IdentityInUseError struct {
	Agent string
	// Instance is the live instance registered under Agent.
	Instance      string
	LastHeartbeat time.Time     // by the store's clock
	Age           time.Duration // of LastHeartbeat, by the store's clock
	// Remaining is how long, by the store's clock, until that instance is
	// stale if it stops heartbeating: the earliest a retry can succeed.
	Remaining time.Duration
}

func (e *IdentityInUseError) Error() string {
	return fmt.Sprintf("registry: agent %q is registered by live instance %s (last heartbeat %s ago by the store's clock); if that process is gone, register again once it is stale, in %s; if it is not, two processes are configured with one agent id",
		e.Agent, e.Instance, e.Age.Round(time.Millisecond), e.Remaining.Round(time.Millisecond))
}

// Is matches [ErrIdentityInUse].
func (e *IdentityInUseError) Is(target error) bool { return target == ErrIdentityInUse }

// IdentityConflictError reports a heartbeat (or deregistration) refused
// because the agent's row no longer continues this process's chain. It
// matches [ErrIdentityConflict]. The process must stop acting as the agent;
// it may register again (with a fresh instance) once the registration it
// lost to is stale.
type IdentityConflictError struct {
	Agent string
	// Instance and Seq are what this process sent.
	Instance string
	Seq      int64
	// CurrentInstance and CurrentSeq are the row's; both are empty when the
	// row is missing.
	CurrentInstance string
	CurrentSeq      int64
	// Deregistered reports that the row is deregistered.
	Deregistered bool
}

func (e *IdentityConflictError) Error() string {
	switch {
	case e.CurrentInstance == "":
		return fmt.Sprintf("registry: agent %q is not registered; register it again", e.Agent)
	case e.CurrentInstance != e.Instance:
		return fmt.Sprintf("registry: agent %q is now registered by instance %s, not this instance %s (this process was replaced after going stale, or its identity was inherited); stop acting as this agent",
			e.Agent, e.CurrentInstance, e.Instance)
	case e.Deregistered:
		return fmt.Sprintf("registry: agent %q instance %s is deregistered; register again to come back", e.Agent, e.Instance)
	}
	return fmt.Sprintf("registry: agent %q instance %s is at heartbeat seq %d, not %d: another process with this very identity (a clone) heartbeated first; stop acting as this agent and register again",
		e.Agent, e.Instance, e.CurrentSeq, e.Seq)
}

// Is matches [ErrIdentityConflict], and also [ErrUnknownAgent] when the
// agent's row is missing.
func (e *IdentityConflictError) Is(target error) bool {
	return target == ErrIdentityConflict || (target == ErrUnknownAgent && e.CurrentInstance == "")
}

// errs is the one place where errors from pgx become tenure's and the
// registry's errors ([pgkit.Interpreter.Error]):
//
//   - Missing schema, tables, columns or functions (SQLSTATE 3F000, 42P01,
//     42703, 42883) match [store.ErrNotMigrated].
//   - Server-side errors that say the server cannot serve now and every
//     error that is not the server's (transport, context deadline or
//     cancellation) match [store.ErrUnavailable]: the call may have been
//     applied.
//   - Any other server error is returned as it is, wrapped with op.
var errs = pgkit.Interpreter{
	Owner:   "registry",
	Migrate: "run `tenure migrate` (or Registry.Migrate) as the schema's owner",
	Grant:   "grant the run-time role what Config.GrantSQL prints",
	Unknown: "it may have been applied",
}

// interpretError classifies err for the call op.
func interpretError(op string, err error) error { return errs.Error(op, err) }

// notAttempted is returned when ctx is done before a call starts.
func notAttempted(op string, err error) error { return errs.NotAttempted(op, err) }
