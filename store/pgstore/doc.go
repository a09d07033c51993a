// Package pgstore is the PostgreSQL [store.Store], tenure's default
// backend. docs/STORES.md lists the optional interfaces of package store
// it implements (notifications and subscriptions, batches, history among
// them).
//
//	pool, err := pgxpool.New(ctx, "postgres://...")
//	store, err := pgstore.New(pool, pgstore.Config{})
//	err = store.Migrate(ctx) // once, as the schema's owner; or `tenure migrate`
//
// pgxpool pings a connection that was idle for a second before it lends
// it, so with renewals TTL/3 apart every renewal costs two round trips.
// Set pgxpool.Config.ShouldPing to ping only connections idle for longer
// than the renew interval (the tenure CLI pings after an hour): a
// connection that died while idle then fails its renewal, and the tenure
// ends and is acquired again on a fresh one.
//
// # Clock
//
// The store owns time (promise P1): every expiry decision is taken by the
// server's clock_timestamp() inside the statement that acts on it, never by
// the client's clock and never by now(), which is the transaction's start
// time (the fence functions, which run inside the caller's longer
// transaction, use clock_timestamp() too). Expiry times are stored as
// timestamptz, so the clock is the server's wall clock, not a monotonic
// one: see Failure modes. Remaining times are reported by that clock, to
// the microsecond; the client never compares its own clock with the
// server's, it counts the reported remaining time down on its monotonic
// clock.
//
// # Tokens
//
// Every new tenure draws its token from the sequence <prefix>token_seq with
// nextval, after the lease row is locked, so a token is greater than every
// token handed out before it for that name (promise P2), whatever happened
// to the row: rows are never deleted, and a release keeps the token.
// Renewals keep the token and advance the renewal seq. The sequence burns
// values on failed acquisitions; tokens only need to grow, not to be dense.
// One sequence serves every lease of a prefix, so tokens of different names
// are comparable but mean nothing across names. The sequence has CACHE 1 (a
// sequence that caches values hands them out of order across sessions, and
// a later tenure could get a smaller token): the migration sets it, and
// every Migrate checks it still holds.
//
// # Notifications
//
// Releases and acquisitions are announced with pg_notify on
// [Objects.Channel] (schema.prefixleases, or a hash of both when that is
// longer than 63 bytes), in the same statement, so a notification is sent
// exactly when the change commits. The payload is a small JSON object
// that [Store.Listen] turns into a [store.Notice]: an
// acquisition with its holder and TTL, a release with the follower the lease
// is kept for.
// Expiry is not announced: nothing runs at the moment a lease expires.
// [Store.Listen] holds one connection of its own and reconnects with backoff
// (50 ms growing to 5 s) when it dies, and calls notify with the empty name
// after every LISTEN, since what was announced in between is lost. Every
// Listen call of one Store, and of its subscriptions ([Store.Subscribe]),
// shares that connection; a subscription's listener is handed only the
// notifications of the names it follows, so that clients sharing a Store
// each hear of their own leases, not of every lease.
// Notifications are an optimisation only: one lost while reconnecting
// delays a follower until the expiry it was told.
//
// # Connection poolers
//
// The store's statements keep no session state: no SET, no session
// advisory lock, no temporary table, each call one statement in its own
// transaction ([Store.Migrate] takes its advisory lock per transaction).
// So they work through PgBouncer in transaction mode (pool_mode =
// transaction), with two settings, and a test runs the conformance suite
// through a real pgbouncer (1.18) to show it:
//
//   - The pool's DefaultQueryExecMode must prepare no named statement:
//     QueryExecModeExec (default_query_exec_mode=exec in the pool's URL),
//     QueryExecModeSimpleProtocol or QueryExecModeCacheDescribe. pgx's
//     default, QueryExecModeCacheStatement, prepares each statement once
//     per connection, and the pooler hands the next transaction another
//     server session, where it does not exist (SQLSTATE 26000) or
//     another client's is in its way (42P05); QueryExecModeDescribeExec
//     spreads one statement over two round trips, which may reach two
//     sessions. Those errors name this setting.
//   - [Store.Listen] needs a session of its own: a LISTEN through the
//     pooler is left behind on a server session the pooler then lends to
//     other clients, so nothing would be heard. Set [Config.ListenConfig]
//     to a direct connection to the server (or a pooler in session mode),
//     or [Config.NoListen] to go without notifications: followers then
//     try again at the expiries they are told (the ordered retry), so a
//     lease released early is taken up to a TTL later.
//
// [Store.CheckPooler] tells a pooler from the server by the backend pid:
// a pooler gives its clients a pid (and cancel key) of its own making,
// not the server's pg_backend_pid(). It refuses, with a [*PoolerError]
// that names what to set, a pool through a pooler whose statement mode or
// listening would fail; the tenure command calls it when it opens a
// store. It cannot tell transaction from session mode, so it asks for
// both settings through any pooler; both work in session mode too. Without [Config.ListenConfig], [Store.Listen] checks its own
// connection the same way and refuses a pooler's. The fence functions
// run in the caller's transaction, which a pooler in transaction mode
// keeps on one server session; a pooler in statement mode (pool_mode =
// statement) refuses transactions of more than one statement, and so
// fenced writes.
//
// # Line
//
// Followers that campaign ([store.AcquireParams.Wait]) wait in line in
// <prefix>waiters, first come first by ticket; a refusal reports the
// caller's place ([store.HeldError].Position). A release keeps the lease
// for the head of the line for [store.Handoff] (250 ms) and names it in
// its announcement, so that the next follower alone tries at once and the
// others stay back: a handover costs the server one acquisition however
// many wait. Anyone else's acquisition meanwhile is refused with a
// [*store.HeldError] that has no holder and names the follower in Next. A
// follower that stops asking is forgotten twice its TTL after the expiry it
// was last told; a dead one at the head of the line delays the next
// handover by at most [store.Handoff]. The line never grants a lease early
// and never extends one.
//
// # History
//
// <prefix>history holds one row per event, written by a trigger on the
// leases table (the function record_history) that writes it in the statement that makes the change:
// granted (a new row, or a new token after a release), taken-over (a new
// token after an expiry, with the tenure it replaced), released, and
// force-released ([Store.ForceRelease], the force_release function, which
// `tenure release --force` calls; it marks its release with the
// transaction-local setting tenure.release_kind, which it clears again).
// The window functions (window_start, window_finish) add window-started,
// window-completed and window-failed, with the window in window_key (null
// for the other events), in their own statement. History reads through
// history_events; history_read, which older libraries call, leaves the
// window events out (they would not know their kind).
// The trigger fires only on UPDATE OF token or released, and its WHEN
// clause only when the token changed or released turned true, so
// renewals and check_lease_strict fire nothing; no index covers the
// columns they change, so their updates stay HOT. Times are the server's
// clock: a new tenure's acquired_at, a release's moment.
//
// Events are kept for [Config.HistoryRetention] (30 days by default),
// which [Store.Migrate] writes into <prefix>settings. One recorded event
// in 16 (those whose id is a multiple of 16) also deletes
// at most 256 events older than that, oldest first, whatever their name,
// through the index on at, skipping rows another transaction is deleting:
// the history keeps pace with its retention (16 deletions per event), the
// other 15 events pay nothing for it, the work an acquisition pays is
// bounded, names that went quiet are cleared too, and tenures of different
// names never wait for each other. [Store.History] calls history_read, which reads through the
// indexes on (name, at) and at. A session that sets tenure.release_kind
// itself can make its own releases look forced; it cannot write, change
// or delete an event.
//
// # Failure modes
//
//   - A statement whose reply does not arrive (connection cut after the
//     commit, context deadline, server shutdown) fails with an error
//     matching [store.ErrUnavailable]: it may have been applied. The client
//     treats the outcome as unknown (promise P3); the renewal chain (seq)
//     then tells a lost reply from a clone.
//   - Serialization failures, deadlocks, a read-only standby and too many
//     connections are [store.ErrUnavailable] too; a renewal that hits one
//     was not applied, but the client cannot know that in general.
//   - The server's wall clock decides expiry. A forward step of that clock
//     (a manual set, an NTP step, a VM resumed from a pause) expires every
//     lease early by the size of the step: another process can take a lease
//     over, with a new token, while the holder still trusts its old token
//     until its next renewal is refused, at most one renew interval later
//     (TTL/3 by default). Fencing covers that window: [pgfence]'s
//     CheckLease judges expiry by the same clock and refuses the old token
//     at once, and Fence refuses it once the new holder wrote. Grants and
//     renewals report the server's clock ([store.Grant.At]): a holder whose
//     next renewal still succeeds after a step sees the server's clock ran
//     ahead of its monotonic time and stands down at once
//     (tenure.LossStoreClockAhead). A backward
//     step makes leases last longer, so a dead holder's lease is taken over
//     late. Run the server with a slewing clock (chrony, ntpd without
//     stepping) and no big corrections.
//   - Tokens and leases are as durable as the database's commits. With
//     asynchronous replication a failover can lose the last commits: the
//     last token bump (the sequence's nextval and the lease row that carries
//     it) may be gone on the new primary, which may then hand an equal
//     token to another holder, and forgets a release or a takeover. Two
//     holders can then carry equal tokens, which no fence tells apart.
//     Use synchronous replication (synchronous_commit = on, or remote_apply,
//     with synchronous_standby_names) when leases must survive a failover.
//     After a failover that may have lost commits, raise the token floor
//     on the new primary before workers acquire there:
//     [Store.RaiseTokenFloor] (`tenure migrate --token-floor`, as the
//     owner) moves the sequence to the server's clock in microseconds,
//     above every token handed out before. A test shows both, with a real
//     primary and standby: the promoted standby hands out tokens the old
//     primary had handed out, and after the floor no token repeats. Holders
//     of the old primary keep their tenures until their next renewal is
//     refused there (or reaches the new primary, which may have forgotten
//     their takeover: it may renew a tenure that was superseded); fences
//     on another database keep refusing their stale tokens.
//   - A lease row locked by a fenced transaction ([pgfence], or the
//     functions below called from SQL) makes renewals, releases and
//     takeovers of that lease wait for it to end. Keep fenced transactions
//     short next to the TTL.
//   - A call on a schema that was never migrated fails with
//     [store.ErrNotMigrated]; a role without the grants [Config.GrantSQL]
//     lists fails with permission denied.
//
// # Roles
//
// The functions are the only interface of the role that runs workers. Three
// roles, each with what it needs and nothing more:
//
//   - The owner runs [Store.Migrate] (or the script of
//     [Config.MigrationSQL]) and owns the tables, the token sequence and
//     the functions. It repairs poisoned fences (fence_reset, `tenure fence
//     reset`). Keep its credentials away from workers.
//   - The run-time role gets what [Config.GrantSQL] prints: USAGE on the
//     schema and EXECUTE on acquire, acquire_slot, renew, release, get_lease,
//     list_leases, history_read, force_release, window_start,
//     window_finish, window_get, fence, check_lease and
//     check_lease_strict (installing the window functions grants them to
//     every role that may execute release, and window_get to every role
//     that may execute get_lease, so roles granted by an older library
//     need no new GRANT). Those functions run as their
//     owner (SECURITY DEFINER) with search_path set to pg_catalog, pg_temp
//     and every object schema-qualified, so nothing the caller creates can
//     stand in for a table or a built-in. The role has no privilege on the
//     tables or the sequence: it cannot rewind or raise a fence, forge a
//     lease, extend one it does not hold, or move the sequence. It can do
//     what the lease protocol does, and no more.
//   - A read-only role (status, history, dashboards) gets what
//     [Config.ReadGrantSQL] prints: EXECUTE on get_lease, list_leases,
//     history_read and window_get.
//
// fence_foreign (a fence for tokens of another store, which it cannot
// check) and fence_reset are granted to nobody by these; grant
// fence_foreign by hand to a role that fences tokens of etcd, Consul or
// Redis, knowing it can then raise any fence of the prefix.
//
// # Schema
//
// [Store.Migrate] makes the schema (see Migrations); [Config.MigrationSQL]
// prints the same schema as a script for a DBA; [Config.GrantSQL] prints
// the grants of a run-time role. With the default [Config] the objects
// are, in schema public:
//
//   - tenure_leases(name text PRIMARY KEY, holder_label text, holder_instance
//     text, token bigint, seq bigint, acquired_at, renewed_at, expires_at
//     timestamptz, released boolean, payload text, kept_label, kept_instance
//     text, kept_until timestamptz): one row per lease name. Rows are never
//     deleted: a release sets released and expires_at = now.
//   - tenure_waiters(name, holder_label, holder_instance, ticket, until):
//     the line of followers of each lease (see Line).
//   - tenure_token_seq: the bigint sequence every new tenure's token is
//     drawn from.
//   - tenure_fences(resource text PRIMARY KEY, token bigint, updated_at
//     timestamptz): the highest token each fenced resource accepted.
//   - tenure_fence_resets(id, resource, old_token, new_token, reason,
//     reset_by, session_role, reset_at): every operator reset of a fence.
//   - tenure_history(id, name, kind, holder_label, holder_instance, token,
//     previous_holder_label, previous_holder_instance, previous_token, at),
//     indexed on (name, at) and on at, and tenure_settings (one row: the
//     history's retention); see History.
//   - tenure_windows(name, window_key, state, holder_label,
//     holder_instance, token, attempts, started_at, finished_at): the
//     windows of [Store.StartWindow] (tenure run --once-per), one row per
//     lease name and window key, never deleted; written only by the
//     functions tenure_window_start and tenure_window_finish, which lock
//     the lease row FOR SHARE and check the tenure by clock_timestamp()
//     (so a takeover waits for them), and read by tenure_window_get.
//   - the functions the store calls, tenure_acquire, tenure_acquire_slot
//     ([Store.AcquireSlot]: the first free of a name's slots, trying each
//     with tenure_acquire, in one statement), tenure_renew,
//     tenure_release, tenure_get_lease, tenure_list_leases,
//     tenure_history_read, tenure_force_release and the window functions
//     above, the trigger function
//     tenure_record_history, and the fence functions
//     tenure_fence, tenure_fence_foreign, tenure_check_lease,
//     tenure_check_lease_strict and tenure_fence_reset (below);
//   - tenure_migrations and tenure_functions: what Migrate applied and
//     installed (see Migrations).
//
// Every name is [Config.TablePrefix] followed by a fixed suffix, in
// [Config.Schema]: two prefixes in one schema are two independent sets of
// leases, tokens, fences and functions. [Store.Objects] lists the names.
// Names are substituted into the SQL once, in [New], always quoted; every
// value travels as a bind parameter.
//
// At run time the store needs only USAGE on the schema and EXECUTE on the
// functions (see Roles). A call on a schema that was never migrated fails
// with an error matching [store.ErrNotMigrated].
//
// # Migrations
//
// The tables, the sequence and their indexes come from numbered
// migrations (migrations/NNN_name.up.sql, today two: 001_tables and
// 002_windows), applied
// once each and recorded in <prefix>migrations. Every function lives in a
// file of its own (functions/NAME.sql: the CREATE OR REPLACE FUNCTION,
// its REVOKE from PUBLIC and, for record_history, the triggers that call
// it), whose first line is "-- revision N"; the current text of a
// function is that file and nothing else. [Store.Migrate] runs in one
// transaction under a transaction-scoped advisory lock of the schema (so
// concurrent calls, and the fleet registry's Migrate, wait for each other
// and never apply anything twice): it applies the missing migrations, then
// installs each function whose record in <prefix>functions (name,
// revision, SHA-256 of the file) is missing, at a lower revision, or at
// the same revision with another hash, and records it. An unchanged
// function is not rewritten. A function recorded at a higher revision was
// installed by a newer library and is left alone, so an older library's
// Migrate never puts an older body back. CREATE OR REPLACE keeps a
// function's grants. Migrate trusts its records: a function dropped or
// edited by hand is installed again only once its row in
// <prefix>functions is deleted. [Store.SchemaStatus] reads the records
// and says what Migrate would do (`tenure migrate --check`).
//
// Running binaries and a changed function: the new body takes effect, for
// every caller, at the commit of the Migrate that installs it, including
// for workers of older libraries, which call functions by name and
// argument types. So a body change must keep its signature's contract
// (arguments, result columns and their meaning) for every library still
// running; PostgreSQL itself refuses a change of result type in place. A
// change of contract is a new function (a new name or signature, in a file
// of its own, granted by [Config.GrantSQL]), and the old one is dropped,
// in a migration, only once no supported library calls it. A new revision
// is a new number in the file's first line; a new table or column is a new
// numbered migration, which must leave every function's contract intact.
//
// Schemas migrated before v0.1.0 recorded migrations 001_init to
// 010_history_prune_sampled, which defined each function again whenever it
// changed; 001_tables and functions/ are their squashed result. Migrate
// upgrades such a schema in place when it records all ten: it forgets
// those versions, applies 001_tables (which finds its tables there and
// changes nothing), installs every function (the same bodies) and records
// this numbering, keeping every lease, token, fence and grant. A schema
// that records only some of them is refused, with what to do. A library
// from before v0.1.0 then refuses to migrate the schema ("records
// migration 001 as tables"), and its workers keep working. This library,
// on a schema migrated before v0.1.0 only up to 008_history_prune_bound
// and not migrated since, fails its batch acquisitions, and the
// [Store.Acquire] calls that go together because they were made at once,
// with [store.ErrNotMigrated] (lone ones still work).
//
// # Operations
//
// Every call is one statement that calls one function (one round trip);
// the functions are PL/pgSQL, whose statements' plans are prepared once per
// session, and the store's statements are fixed text, so pgx caches their
// prepared plans too (in its default mode; see Connection poolers). [Store.Acquire] calls acquire: one INSERT … ON
// CONFLICT DO UPDATE … WHERE (released or expired) … RETURNING, wrapped in a
// CTE that, when the lease is held, returns the holder, token, seq and
// remaining time instead (two round trips when it races with the first
// ever insert of the same name). [Store.Renew] calls renew, which renews a
// whole batch with one UPDATE over unnest'ed arrays. [Store.AcquireBatch]
// calls acquire_batch, which takes the free leases of a
// batch with one UPDATE and creates the missing ones with one INSERT, in
// name order, so that batches of several clients never wait for each
// other in a cycle; a row another transaction has locked is skipped and
// its lease asked for again alone, and the batch's acquisitions are
// announced in as few notifications as fit under PostgreSQL's 8,000 bytes
// (a JSON array each). The client sends many acquisitions made at once
// this way (see [tenure.Client.Acquire]), and so does the store itself
// for [Store.Acquire] calls made at once by any of its callers (many
// clients sharing it): while two are out, later ones wait for one to come
// back and go together, up to 1,000 a statement. [Store.Renew] calls made
// at once go together the same way, up to 10,000 leases a statement of
// renew, each lease at most once: the renewal rounds of many clients that
// acquired together, which come due together, take a few statements rather
// than one each. [Store.Release] calls
// release, which expires the lease now and keeps its row;
// [Store.ReleaseBatch] calls it once per tenure in one statement over
// unnest'ed arrays (a client's shutdown: one round trip per 10,000 leases).
//
// The leases table is kept at fillfactor 50 and has no index but its
// primary key, so a renewal, which changes only seq and times, can be a
// heap-only (HOT) update that leaves no index entry and no work for vacuum
// (migrations/001_tables.up.sql says how much it saves and what holds it
// back). Do not add
// an index on a column a renewal changes.
//
// # Fence functions
//
// Installed by the migration in the same schema, callable from any language
// inside the caller's own transaction (SECURITY DEFINER: the caller needs
// only EXECUTE, see Roles). Package [pgfence] calls them from Go.
//
//   - <prefix>fence(resource text, token bigint) RETURNS void: records token
//     as the highest token resource accepted. An equal or greater token
//     passes; a lower one raises SQLSTATE TF001 with DETAIL
//     'recorded=<n> offered=<m>'. A token the token sequence never issued
//     (greater than its last value) raises SQLSTATE TF004 with DETAIL
//     'issued=<n> offered=<m>' and changes nothing: a fence takes only
//     tokens of the leases of the same schema and prefix. It locks the
//     resource's fence row until the transaction ends, so fenced writes to
//     one resource commit in token order, and a rollback leaves the fence
//     as it was.
//   - <prefix>fence_foreign(resource text, token bigint) RETURNS void: fence
//     without the TF004 check, for tokens of another store. Not in the
//     run-time grants.
//   - <prefix>fence_reset(resource text, to_token bigint, reason text)
//     RETURNS bigint: the operator's repair of a poisoned fence. Sets the
//     fence to to_token (0 up to the last token issued, else TF004), records
//     the reset in <prefix>fence_resets with reason, current_user,
//     session_user and clock_timestamp(), and returns the token it
//     replaced; a resource without a fence raises TF005. It runs as its
//     caller (SECURITY INVOKER) and PUBLIC may not execute it: only the
//     owner can, and reset_by names the role that did.
//   - <prefix>check_lease(name text, token bigint) RETURNS void: passes when
//     the lease is held with token by clock_timestamp(), raises SQLSTATE
//     TF002 otherwise with DETAIL 'current=<n> offered=<m>
//     state=absent|superseded|released|expired'. It takes a FOR SHARE lock
//     on the lease row until the transaction ends, so a takeover (and a
//     renewal) waits for the caller's commit.
//   - <prefix>check_lease_strict(name text, token bigint, holder_label text,
//     holder_instance text, seq bigint) RETURNS bigint: check_lease that also
//     requires holder and seq to match and advances seq by one, returning
//     the new seq. A mismatch of holder or seq raises SQLSTATE TF003 with
//     DETAIL 'current=<n> offered=<m> current_seq=<s> offered_seq=<r>'. It
//     locks the row FOR NO KEY UPDATE until the transaction ends: of two
//     byte-identical clones, only one can pass. The holder must renew with
//     the new seq; a rolled-back transaction leaves seq where it was, so the
//     holder's next renewal fails and it acquires again with a new token.
//     It is for the Go library only ([pgfence] StrictTx tells the client
//     the new seq): a process that calls it without telling its client,
//     such as a `tenure run` command, ends its own tenure at the next
//     renewal.
//
// With the default prefix they are tenure_fence, tenure_fence_foreign,
// tenure_fence_reset, tenure_check_lease and tenure_check_lease_strict.
// Null arguments raise 22004
// (null_value_not_allowed); a token below 1 given to fence raises 22023
// (invalid_parameter_value).
//
// [pgfence]: https://pkg.go.dev/github.com/tenure-dev/tenure/fence/pgfence
package pgstore
