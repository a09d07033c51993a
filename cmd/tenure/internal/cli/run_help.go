package cli

// runAbout is the text of tenure help run: what run does, and what it
// kills, when and by whom.
const runAbout = `Run acquires the lease NAME and runs CMD under it, in its own process
group, with TENURE_TOKEN (the fencing token), TENURE_LEASE (NAME) and
TENURE_HOLDER (label/instance) in its environment; --store, when given, is
passed on as TENURE_STORE. Standard input, output and error pass through,
and so does the exit status (128+N when signal N ended the command).
SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT
sent to tenure are forwarded to the command's process group; after
SIGTERM, the command's tree is killed if it still runs the grace later
(then run releases the lease and exits 137). At a terminal, the command's
group is the foreground group; when ^Z stops it, run takes the terminal
back and stops too (the lease is not renewed while stopped, so a stop
longer than the grace costs the lease: see below).

Run can be a container's entrypoint, PID 1: it reaps the orphans that
come to it as they exit, and forwards SIGTERM. On a pod's deletion the
kubelet sends SIGTERM and SIGKILLs terminationGracePeriodSeconds (30s by
default) later: keep it at least the grace plus a few seconds for the
release, or the lease is left to expire.

Without --store and TENURE_STORE, run uses this host's SQLite file and
says so on standard error when it creates the file (once per host and
user, not on every run); an empty --store or TENURE_STORE is refused
(exit 64), so a misconfigured host does not silently run alone.

When the lease is held by someone else, run exits 75 after one line naming
the holder, its token and its remaining time by the store's clock
(--held-exit-code N exits N instead, so that cron or systemd can count
"someone else runs it" as success); with --wait it waits for the lease
instead (up to --wait-timeout, if given), with one line on standard error
each time the holder changes while it waits (with -v or --log-format
json, one log record each: msg "lease holder changed", keys lease,
holder, token, remaining).

--slots N makes NAME a semaphore of N holders: run takes the first free
of the N slots of NAME, each a lease of its own named NAME#SLOT (SLOT from
0 to N-1) with its own fencing tokens, renewals, fence, status and
history, and the command gets TENURE_SLOT (the slot, from 0) beside
TENURE_TOKEN, with TENURE_LEASE set to NAME#SLOT. When all N are held, run
exits 75 naming every holder; with --wait it takes whichever slot frees
first (it prints the holders once, not each change while it waits). Every run of NAME must give the same N: a run with --slots 2 beside
one with --slots 3 lets three hold. Without --slots NAME is a plain lease,
apart from its slots (--slots 1 is the one slot NAME#0).

--json FILE writes one JSON object describing the outcome when run ends
(- writes it to standard error; a file is replaced whole, so a reader never
sees half of one):
  lease, store           the lease name and the store (secrets removed);
                         with --slots, NAME#SLOT once a slot was taken
  slot                   with --slots, the slot taken, from 0
  holder, token          this run's identity and fencing token, once acquired
  acquired_at, held_ms   when the lease was acquired (this host's clock, UTC)
                         and how long it was held until released or lost
  ended                  exited: the command ran and exited; lost: the lease
                         was lost while it ran (reason says why, e.g.
                         "progress stalled", "revoked"); held: held elsewhere,
                         not acquired (held_by names the holder);
                         wait_timeout: --wait-timeout ran out (held_by, when
                         known); interrupted: a signal ended the wait
                         (signal); error: anything else (error)
  command                when the command ran: exit_code, or signal (e.g.
                         "SIGKILL") when a signal ended it
  exit_code              tenure's own exit status
  error                  the line tenure printed on standard error, if any

--progress-timeout D turns on the progress gate: the command must report
progress at least every D with "tenure progress" (it reaches this run
over TENURE_RUN_CONTROL), or the lease is given up as lost ("progress
stalled", exit 79) so that a healthy holder can take over. --health ADDR
serves three probes on ADDR, each 200 or 503 with one line saying why:
  /livez    liveness: 503 only while this run holds the lease and the
            command has not reported progress for --progress-timeout (a
            wedged holder); a standby waiting with --wait is alive
  /readyz   readiness: 200 while waiting or holding, 503 once the tenure
            ended and the run is on its way out; a standby is ready, so a
            rolling update's new pod becomes ready beside the holder
  /leaderz  the holder-only check (/healthz is its older name): 200 only
            while the lease is held and progress is fresh; every standby
            answers 503, so never use it as a Deployment's readiness or
            liveness probe
--metrics ADDR serves GET /metrics on ADDR: the lease client's Prometheus
metrics (tenure_lease_held, tenure_lease_holder_info,
tenure_lease_transitions_total, tenure_losses_total by reason, renewal
latency, tenure_build_info; go doc github.com/tenure-dev/tenure/metrics
lists them) and the Go runtime's and the process's, so that a job under a
lease is observable without tenure serve.

--once-per D runs the command at most once per window, across every host
sharing the store: the window is --window-key K when given (a date, a
batch id: the caller names it), else the store's own clock divided by D
(never this host's clock; etcd, which has no clock a transaction reads,
needs --window-key). Under the lease, the store records that the window
began, in the step that checks the tenure; the command gets TENURE_WINDOW
(the key); its exit 0 records the window completed before the release.
A run that finds the window running waits for the lease; one that finds
it completed exits 80 after one line naming who ran it, when and with
which token, and runs nothing. A window whose run failed, or whose tenure
ended halfway (crash, lost lease, pause), is not run again (exit 80)
unless --retry-failed, which lets this run take it over with its newer
token; the paused run, when it wakes, is fenced (exit 79) and cannot
record the window. PostgreSQL, SQLite, Redis and etcd record windows.

--payload publishes TEXT with the tenure (the address where the command
serves, say: up to 1024 bytes, no control characters); followers read it
with tenure status, or in their program with Client.Observe. It is not
secret: whoever can read the store can read it.

While the command runs the lease is renewed every TTL/3. What is killed,
when, and by whom:
  - the whole tree: the command's process group and every descendant (run
    is a child subreaper, so background jobs and setsid escapees stay
    under it). Where cgroup v2 can be written (root, or a delegated
    subtree such as a systemd unit's with Delegate=yes), the command is
    also born in a cgroup of its own under run's, which no process of the
    tree can leave; it is killed by the cgroup (frozen, cgroup.kill, and
    SIGKILL to each process listed) and waited for until empty, then
    removed. Where cgroup v2 cannot be used but the cgroup v1 freezer is
    mounted (as root), a freezer cgroup of its own serves the same way
    (frozen, SIGKILL to each process in it, thawed; gone when its tasks
    are); TENURE_RUN_NO_CGROUP_V2=1 passes over cgroup v2, for tests.
    Elsewhere, or with TENURE_RUN_NO_CGROUP=1 (for tests, and
    hosts where tenure must not make cgroups), run finds the tree by the
    subreaper and /proc alone. Either way a process counts as gone only
    when no thread of it runs: one whose main thread exited while others
    go on (it reads as a zombie) is still waited for and killed. The
    "On this host" line below, and tenure doctor, say which mode is in
    force here;
  - by run, on loss (renewals failing, superseded, released by an
    operator, clone or suspension detected): one line with the reason and
    the token, SIGTERM, SIGKILL after the grace (--grace, else 10s or TTL/4
    when 10s does not fit); at once when the loss was found at or after
    the local deadline or after the store let the lease go (released with
    --force, expired, taken over: heard at once from a store that
    notifies); exit 79. The loss is otherwise declared the grace before
    the local deadline, itself a safety margin before the store's expiry;
  - by a watchdog (tenure run re-executed, a process of its own, fed each
    kill deadline over a pipe): SIGKILL when tenure is stopped, starved or
    killed past the deadline, by the cgroup too when there is one, which
    it then removes; the command also has Pdeathsig SIGKILL;
  - on SIGPWR (kill -PWR PID, for resume and restore hooks), or when the
    command runs "tenure revoke-inherited": SIGKILL at once, the tenure
    is revoked and not released (it expires by its TTL), exit 79;
  - after a normal exit: leftover descendants get SIGTERM, then SIGKILL
    after the grace. The lease is released only when none is left, so a
    waiter takes over at once and alone;
  - by run, on SIGTERM to tenure (docker stop, a pod's deletion,
    systemctl stop): forwarded to the command's group, SIGKILL to the
    tree the grace later; then the release.
The command's own "tenure release $TENURE_LEASE" asks run to release (over
the unix socket named by TENURE_RUN_CONTROL): that is not a loss; run
passes the command's status on, and kills the tree if it still runs the
grace later (the next holder may already have started).
What only the fence covers: a pause of the whole machine (VM suspend,
snapshot restore) freezes the watchdog and the monotonic clock with
everything else; a write in flight when it resumes is refused only by the
resource's token check.`
