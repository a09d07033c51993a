// Package doctor is `tenure doctor`: it examines one store as a holder on
// this host would meet it and returns findings, each OK, WARN or FAIL with
// what to do.
//
// The checks, in order: the store answers (a few reads of a name that does
// not exist, their median round trip judged against the TTL's safety
// margin); the schema is at this library's version and the role may read it
// (PostgreSQL, MySQL); the TTL makes a valid lease client configuration and
// is not below the store's minimum (etcd's 2 s, Consul's session_ttl_min);
// this host's wall clock against the store's (PostgreSQL clock_timestamp(),
// Redis TIME, MySQL SYSDATE(6); SQLite is this host; etcd and Consul have
// no wall-clock expiry) and whether either clock steps over about a second
// of monotonic time; the lease "tenure-doctor" ([Lease]) acquired, renewed
// and released, which proves the role's privileges through real calls; the
// release's notification arriving; for Redis, the persistence and
// replication settings under which it can lose acknowledged writes, for
// NATS the bucket's replicas (with one, a power loss can); and
// identity sources that look inherited: live holders with this host's
// label (the host name, as tenure run uses it) that no process on this
// host runs (read from TENURE_HOLDER in /proc/PID/environ), and, where the
// fleet registry exists, live agents that give the same machine-id or
// hostname label (a copy of a machine, a cloned VM or a snapshot restored,
// shows up that way); and last, how tenure run supervises its command on
// this host: OK with a cgroup of the command's own (cgroup v2, or the
// cgroup v1 freezer), WARN with the child subreaper and task scan alone,
// saying why there is no cgroup.
//
// A store that cannot be opened gives one FAIL. Doctor's lease stays in
// the store as one released record, whose token counter the next run
// takes up; `tenure status` and `tenure serve` leave it out of their lists
// of every lease. Doctor changes nothing else.
package doctor
