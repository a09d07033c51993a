// Package registrycli holds the fleet registry's subcommands of the tenure
// command, as functions the command table calls with an opened
// [registry.Registry]: [Agents] (`tenure agents [--json]`) and [Owner]
// (`tenure owner RESOURCE [--json]`). Each takes the subcommand's own
// arguments (without the command name and without flags the caller handles,
// such as --store), writes to the given writers and returns the exit code.
// Flags may follow the positional argument; "--" ends the flags.
//
// # Exit codes
//
//	0    success; for owner: the resource's owner is alive
//	1    any other error
//	3    owner: the resource has no owner (never placed, or removed)
//	4    owner: the resource's owner is dead (stale or deregistered by the
//	     store's clock); do not place it elsewhere, reassign it
//	64   usage: unknown flag, missing or extra argument, bad resource id
//	     (EX_USAGE)
//	69   the store could not be reached (EX_UNAVAILABLE)
//	78   the registry's schema is not migrated: run tenure migrate
//	     (EX_CONFIG)
//
// 3 and 4 are answers, not failures: a script can branch on them, and they
// stay clear of sysexits.h (64–78) and of the codes the other tenure
// subcommands use. Every error is one line on standard error beginning
// "tenure: ".
//
// # Output
//
// agents prints a table: id, state (alive, stale or deregistered), heartbeat
// age by the store's clock, owned-resource count, address, instance and
// labels, ordered by id. With --json it prints one object on one line:
//
//	{"agents":[{"id":"host-1","state":"alive","instance":"…","address":"10.0.0.1:7000",
//	  "labels":{"zone":"eu-1"},"capacity":{"cpu":64},"owned":12,"seq":8040,
//	  "registered_at":"…","last_heartbeat":"…","heartbeat_age_ms":3120,
//	  "last_gap_ms":10002,"heartbeat_interval_ms":10000,"stale_after_ms":30000,
//	  "conflicts":0,"last_conflict_at":null,"last_conflict_instance":""}]}
//
// owner prints one line naming the outcome, the agent and its heartbeat age
// by the store's clock. With --json:
//
//	{"resource":"sandbox-42","outcome":"alive","agent":"host-1","address":"…",
//	 "last_heartbeat":"…","heartbeat_age_ms":3120,"deregistered":false,
//	 "created_at":"…","metadata":{…}}
//
// outcome is "alive", "no_owner" or "owner_dead"; for no_owner the agent
// fields are empty or null.
package registrycli
