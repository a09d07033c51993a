// Package registry is tenure's fleet registry over PostgreSQL: which agents
// (hosts) are alive, and which agent owns each resource pinned to one host
// (a sandbox, a database on a host's local volume).
//
//	reg, err := registry.New(pool, registry.Config{})
//	err = reg.Migrate(ctx) // once, as the schema's owner; or `tenure migrate`
//
//	// On each agent:
//	g, err := reg.Register(ctx, registry.RegisterParams{ID: "host-17", Address: "10.0.0.17:7000"})
//	hb, err := registry.NewHeartbeater(reg, g, registry.HeartbeaterConfig{DeregisterOnStop: true})
//	err = hb.Run(ctx) // blocks; returns when ctx is done or the identity is lost
//
//	// On the control plane:
//	own, err := reg.Place(ctx, "sandbox-42", registry.PlaceParams{})
//	own, err = reg.Owner(ctx, "sandbox-42")
//
// # Two lessons
//
// The design comes from two production bugs of the system tenure grew out
// of; the tests reproduce both with deliberately naive code and show that
// this package does not have them.
//
// A lease pointing at a dead agent is not "no owner". The old lookup joined
// ownerships with the live agents only, so a resource whose host had died
// came back as unowned, and the caller placed it on another host: a second,
// empty copy of a resource whose data was still on the first host's disk.
// Here [Registry.Owner] answers exactly one of three outcomes: the owner,
// alive; [ErrNoOwner]; or an [*OwnerDeadError] (matching [ErrOwnerDead])
// carrying the agent and its last heartbeat by the store's clock.
// [Registry.Place] returns that same error and places nothing. The only way
// from a dead owner to another host is an operator's [Registry.Reassign],
// which takes a reason, compares-and-sets on the old owner, and is stored
// (see [Registry.Reassignments]) and logged.
//
// Never cache a negative about liveness (promise P8). The old agent-list
// cache was refreshed with the agents that had heartbeated recently, and an
// agent missing from it was dead: one slow heartbeat at the wrong instant
// left a healthy host out of a refresh, and it was evicted. Here [Cache]
// keeps positives only. A cached "alive" is served within its TTL (and
// never past the moment the store would call the agent stale); an agent
// that is absent from the cache or whose entry expired is asked of the
// store before anyone is told it is dead, and "dead" is never cached.
//
// # The store's clock
//
// Liveness is judged by PostgreSQL's clock_timestamp(), inside the
// statement that acts on it (promise P1): a heartbeat sets heartbeat_at to
// it, and every read computes "alive" and the heartbeat's age from it.
// The Go clock is never used to decide liveness; the local monotonic clock
// only bounds how long a [Cache] serves a positive and paces the
// [Heartbeater]. An agent is alive when it is registered, not deregistered,
// and its last heartbeat is younger than its StaleAfter.
//
// Each agent's HeartbeatInterval and StaleAfter ([Config]; 10 s and 30 s
// by default, StaleAfter at least twice the interval) are stored in its row
// when it registers, so every reader judges an agent by the timings it
// declared, whatever the reader's own Config says.
//
// # Identity
//
// Every [Registry.Register] makes a fresh instance id in memory (promise
// P5). An agent's row carries the current instance and a heartbeat chain
// seq; a heartbeat is a compare-and-set on (id, instance, seq) that
// advances seq (promise P6). The rules:
//
//   - Register inserts a new agent, or takes over the row of an agent that
//     is stale or deregistered (the ownerships stay: they belong to the
//     id); it refuses, with an [*IdentityInUseError] that says when a retry
//     can succeed, when another instance is alive under the id. A live row
//     is never overwritten: a restarted agent waits until its previous
//     instance is stale, unless that instance deregistered on its way out,
//     and two hosts misconfigured with one id cannot steal it from each
//     other.
//   - A heartbeat of an instance that was taken over (it was paused past
//     StaleAfter, or it is an older process that inherited the id), or of a
//     clone that lost the race for the next seq, is refused with an
//     [*IdentityConflictError]; [Heartbeater.Run] returns it and the
//     process must stop acting as the agent. Nothing is merged.
//   - The refusal is counted on the row, so the instance that keeps the
//     identity hears of it at its next heartbeat ([Beat.NewConflicts],
//     [HeartbeaterConfig.OnConflict]) and `tenure agents` shows it.
//   - A heartbeat whose reply was lost is not a clone: each heartbeat
//     carries a random nonce stored on the row, and the [Registration]
//     returned with an [store.ErrUnavailable] error remembers it, so the
//     next heartbeat of that process is recognised. A clone that advanced
//     the chain itself left its own nonce and is still told apart.
//   - An agent that heartbeats again after being stale is alive again
//     ([Beat.Revived]); resources reassigned meanwhile stay where they were
//     moved.
//
// # Ownership and placement
//
// An ownership (resource → agent id, created at, metadata) is a long-lived
// row, separate from the agent's row. [Registry.Place] returns the
// existing owner when there is one, never a second; otherwise a [Policy]
// ([LeastOwned] by default) chooses among the agents alive by the store's
// clock and the ownership is inserted with INSERT … ON CONFLICT DO NOTHING,
// only if the chosen agent is still alive at that instant, and read again:
// concurrent Place calls for one resource, from any number of processes,
// all return the same owner. [Registry.Remove] forgets the ownership of a
// resource that no longer exists (with a reason, stored and logged).
//
// # Schema
//
// [Registry.Migrate] applies the embedded migrations
// (migrations/NNN_name.up.sql) in one transaction under the same advisory
// lock as pgstore's Migrate, and records each version in
// <prefix>registry_migrations, so one `tenure migrate` can apply both in
// either order. [Config.MigrationSQL] prints the same schema as a script.
//
// Every statement the registry runs is a function installed by migration
// 002 (tenure_agent_register, _heartbeat, _conflict, _deregister, _get,
// _list, tenure_owner_get, _place, _lock, _reassign, _history, _remove),
// which runs as its owner (SECURITY DEFINER) with search_path pg_catalog,
// pg_temp. [Config.GrantSQL] grants a run-time role USAGE on the schema and
// EXECUTE on them, and nothing on the tables: it cannot forge a heartbeat,
// revive a stale agent, move an ownership without a history row or rewrite
// the history. [Config.ReadGrantSQL] grants a read-only role the four
// reading functions. Migration 002 takes the write privileges on the
// tables from every role but their owner, so a schema upgraded in place
// needs the grants of this version. With the default [Config] the objects
// are, in schema public:
//
//   - tenure_agents(id text PRIMARY KEY, instance, seq, beat_nonce, address,
//     labels jsonb, capacity jsonb, heartbeat_interval_us, stale_after_us,
//     registered_at, heartbeat_at, last_gap_us, deregistered, conflicts,
//     last_conflict_at, last_conflict_instance): one row per agent id, never
//     deleted by the registry;
//   - tenure_owners(resource text PRIMARY KEY, agent_id REFERENCES
//     tenure_agents ON DELETE RESTRICT, created_at, updated_at, metadata
//     jsonb): so an agent row can never vanish from under its ownerships;
//   - tenure_reassignments(id, resource, from_agent, to_agent, reason,
//     from_alive, from_last_heartbeat, reassigned_at): every
//     [Registry.Reassign] and [Registry.Remove] (to_agent empty).
//
// Names are [Config.TablePrefix] followed by a fixed suffix, in
// [Config.Schema], always quoted; every value is a bind parameter.
//
// # Failure modes
//
//   - The store is unreachable or answers too late: calls fail with an error
//     matching [store.ErrUnavailable], never with a verdict. A [Cache]
//     returns the store's error for an agent it has no positive for; it
//     does not guess "dead". Writes (Register, Heartbeat, Place, Reassign,
//     Remove) may have been applied.
//   - An agent's host pauses or loses its network for longer than
//     StaleAfter: it is dead to every reader (its resources answer
//     [ErrOwnerDead]), and comes back alive with its next heartbeat unless
//     another instance registered under its id meanwhile.
//   - An agent crashes and restarts at once: its new Register is refused
//     with an [*IdentityInUseError] until the old instance is stale (up to
//     StaleAfter). Deregistering on clean shutdown avoids the wait.
//   - A Register whose reply is lost: retry with the same
//     [RegisterParams.Instance] (made with [RegisterInstance]), which
//     refreshes the row instead of being refused.
//   - Clock: the store's clock may jump (an NTP step on the database host);
//     heartbeats made before a forward jump then look older, and agents may
//     look stale for up to one interval. The Go clocks of agents do not
//     matter.
//   - The agents' timings are per row: an agent registered with a long
//     StaleAfter stays alive longer after it dies; `tenure agents` shows
//     each row's timings.
//   - PostgreSQL failover to an asynchronous standby may lose the last
//     heartbeats (agents look older) and the last placements (a resource
//     placed just before looks unowned again): run synchronous replication
//     when that matters.
package registry
