// Package cli is the tenure command: [Main] parses the arguments, runs one
// subcommand and returns the process's exit code. Each subcommand has its
// own [flag.FlagSet]; flags are written --name or -name, and in status,
// history, release, migrate, fence, agents and owner they may follow the positional
// arguments.
//
// # Commands
//
//   - run: acquire a lease (or wait for it) and run a command under it, in
//     its own process group, with TENURE_TOKEN, TENURE_LEASE and
//     TENURE_HOLDER in its environment. INT, TERM, HUP, QUIT, USR1, USR2,
//     WINCH and CONT are forwarded to the command's group, and the tree is
//     killed the grace after a SIGTERM; SIGPWR ([RevokeSignal]) revokes.
//     run is a child subreaper that reaps orphans as they exit (it may be
//     a container's PID 1), puts the command in a cgroup of its own
//     (cgroup v2, else the cgroup v1 freezer) where the host allows it
//     (help and doctor say which), and kills the
//     command's whole tree ([supervise]): on loss SIGTERM, and SIGKILL
//     after the client's grace (at once after a detected pause); a
//     watchdog process (run --watchdog, hidden) SIGKILLs the tree when run
//     is stopped or killed past its kill deadline, and says so only then
//     (a kill run decided itself, run reports). The lease is released only
//     when no descendant is left. A whole-machine pause is covered by the
//     fence alone. For operators' habits: --held-exit-code N replaces exit
//     75 when the lease is held elsewhere (cron, systemd); --json writes
//     the outcome as one JSON object ([runOutcome]); --wait reports each
//     change of holder ([tenure.Client.Observe]); --progress-timeout turns
//     on the library's progress gate and --health serves a /healthz that
//     asks it. --slots N takes one of N slots of the name (leases
//     NAME#0 … NAME#N-1, [tenure.Client.CampaignSlot]) and gives the
//     command TENURE_SLOT.
//   - progress, revoke-inherited: called by run's command over the control
//     socket (TENURE_RUN_CONTROL): progress feeds the progress gate;
//     revoke-inherited, for fork and restore hooks, removes the user's
//     marker files (--remove) and revokes the run's tenure.
//   - status: the leases as the store sees them, by the store's clock; as
//     a table, or one JSON object per snapshot with --json; again every
//     --interval with --watch.
//   - history: the recorded events of one lease (granted, taken-over,
//     released, force-released), oldest first, with holders, tokens and
//     the tenure before, by the store's clock; --since, --limit, --json.
//     PostgreSQL and SQLite keep history ([store.Historian]); other stores
//     are refused with exit 64.
//   - release: give up the caller's own lease (TENURE_HOLDER and
//     TENURE_TOKEN must match it), or with --force end anyone's tenure,
//     keeping the token counter so its old holder is fenced. On a store
//     whose renewal sets a new expiry (PostgreSQL, MySQL, SQLite, Redis)
//     release renews in the holder's name with the seq it read and the
//     time left, so the holder's next renewal is a seq mismatch while the
//     expiry stays, and no one else gets the lease before the holder's
//     trusted time has run out; on the others (etcd, Consul, NATS,
//     Kubernetes) it expires the lease now and the holder hears of it
//     within a round trip. --now expires it at once everywhere (recorded
//     in the history as force-released, [store.ForceReleaser]).
//   - migrate: create or upgrade the store's schema (on PostgreSQL the
//     fleet registry's too), or print its SQL (PostgreSQL and SQLite), with
//     the grants of a run-time role (--grant: EXECUTE on the functions,
//     nothing on the tables) or a read-only one (--grant-read). Redis, etcd
//     and Consul keep no schema: migrate says so.
//   - fence reset: the owner's repair of a poisoned PostgreSQL fence, set to
//     --to N and recorded with --reason in the fence_resets table; the
//     run-time role is refused.
//   - agents, owner: the fleet registry ([registrycli.Agents],
//     [registrycli.Owner]) in the PostgreSQL database of the store URL;
//     another store is refused with exit 64.
//   - demo: the story of a paused leader, with and without fencing, and of
//     a holder cloned by a restored snapshot, under the strict fence and the
//     token fence ([demo.Main]; --scene picks one), always on SQLite files
//     of its own, so it needs no server. Its workers are tenure itself, run
//     as the hidden command demo-worker ([demo.Worker]), which is internal.
//   - doctor: check a store and this host ([doctor.Check]) and print one
//     finding per check, OK, WARN or FAIL with what to do; exit 1 when any
//     is a FAIL.
//   - serve: a status page over HTTP ([serve]): the leases by the store's
//     clock, the registry's agents, a timeline of holders and tokens and
//     the changes it saw, /metrics and /healthz; no JavaScript.
//   - completion: the bash, zsh or fish completion script; docs: a man page
//     (--man DIR) or markdown page (--markdown DIR) per command. Both are
//     read off the command table, as help is: the pages show each
//     command's synopsis, text and flags, and the scripts ask the hidden
//     command __complete, which walks the typed words by the rules Main
//     parses them by and answers with commands, flags, the fixed words of
//     a command or flag, or "a path here" (run's command line, FILE, PATH
//     and DIR arguments). One description of the commands, one parser.
//   - version, help.
//
// The store comes from --store, else TENURE_STORE, else the default SQLite
// file; [storeurl] parses it and [storeopen] opens it. A --ttl below the
// store's minimum (etcd 2 s, Consul its servers' session_ttl_min) is
// refused before anything is opened.
//
// The global flags -v and --log-format json|text may come before the
// command's name or among its flags. They set the lease client's
// [log/slog] logger (run's): on standard error, at level warn, or info
// with -v, as text or JSON lines with the keys lease, token, holder,
// reason, store and err. A --log-format other than json or text is a
// usage error (64).
//
// Subcommands live in a table built by commandTable; adding one is adding
// an entry there.
//
// # Exit codes
//
//	0    success; under run, the command's own exit status passes through
//	     (128+N when signal N ended it); for owner, the owner is alive;
//	     for release, the lease is not held or does not exist
//	1    any other error; for demo, the story did not come out as it must;
//	     for doctor, a check failed (an unreachable store included)
//	3    owner: the resource has no owner
//	4    owner: the resource's owner is dead; do not place it elsewhere
//	64   usage: unknown command or flag (or a long flag with one dash,
//	     -store for --store), bad duration, name, store URL (one the
//	     server refuses: user, password, database) or --health/--http
//	     address, a --grace that does not fit --ttl, a --ttl below the store's
//	     minimum, agents or owner on a store other than PostgreSQL
//	     (EX_USAGE)
//	69   the store could not be opened or reached (EX_UNAVAILABLE)
//	75   not acquired: the lease is held by someone else, or --wait-timeout
//	     ran out; the message names the holder, its token and its remaining
//	     time by the store's clock (EX_TEMPFAIL: try again later)
//	78   the store's schema is not migrated, or (migrate --check) behind this
//	     version: run tenure migrate (EX_CONFIG)
//	79   the tenure was lost while the command ran, and the command was
//	     stopped
//	80   run --once-per or --window-key: the window already ran (completed,
//	     or begun and not completed, without --retry-failed); nothing was
//	     run; the line names who ran it, when and with which token
//	126  the command could not be executed; 127 it was not found
//	128+N  run was interrupted by signal N while waiting for the lease, or
//	       demo by signal N
//
// 3 and 4 are answers, not failures (see [registrycli]): a script branches
// on them.
//
// 79 and 80 are deliberately outside sysexits.h (64–78), the shell's 126–127 and
// the signal range (128+): it says "the job was stopped because its lease
// was lost", which a scheduler must tell apart from the job's own failure
// (here the job was interrupted from outside, and another holder may
// already be doing the work) and from "not acquired" (nothing ran); 80
// says "this window's work was done (or begun) already", which cron can
// count as success. A command may exit with any of these codes
// itself; tenure prints a line on standard error whenever the code is its
// own.
//
// Every error is one line on standard error beginning "tenure: ", never a
// stack trace; passwords in store URLs are masked.
package cli
