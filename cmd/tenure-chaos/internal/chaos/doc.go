// Package chaos is tenure's chaos harness (Tier 1 and Tier 2 of the
// evidence; Tier 0, the deterministic simulation, is internal/sim): real
// worker processes holding one lease with the real library over a real
// store, a nemesis injecting faults, and a checker over what reached the
// fenced resource. The command is cmd/tenure-chaos; its results are in
// docs/RELIABILITY.md.
//
// # A cell
//
// A cell is one backend (postgres, redis, etcd, consul, mysql, k8s,
// nats, postgres-failover, etcd-cluster, consul-cluster, postgres-run,
// postgres-slots), N worker
// processes (default 5: re-executions of tenure-chaos in the worker role),
// TTL 2 s, a duration and a seed. Each worker reaches its store through a
// faultnet proxy of its own, campaigns for the cell's lease, and while it
// holds it loops: check [tenure.Lease.Token], do 5 ms of "work", then make
// one read-modify-write write (append the next link to a chain) to the
// fenced resource and the same write to an unfenced twin:
//
//   - postgres: leases and chains in one database through the proxy; the
//     fenced chain is written in pgfence.StrictTx (the strict check on the
//     lease row, which advances the renewal chain, so clones are safe).
//   - redis: the harness starts a redis-server that fsyncs every write
//     before replying, so a restart keeps the token counter and both
//     chains; the chains are hashes on it, the fenced one written with
//     redisfence.StrictHSet (the strict check on the lease's own keys,
//     which advances the renewal chain, so clones are safe).
//   - mysql: leases and chains in the machine's MySQL/MariaDB database
//     (TENURE_TEST_MYSQL_URL) under a prefix of the cell's own, through the
//     proxy; the fenced chain is written in mysqlfence.StrictTx (the strict
//     check on the lease row, so clones are safe). The server is shared, so
//     it is neither restarted nor are its sessions killed.
//   - etcd, consul: the harness starts the server (Consul as a server agent
//     with its Raft log on disk, so a restart keeps its indexes, which are
//     its tokens); the chains are keys on it beside the lease prefix,
//     through the proxy, the fenced one written with the store's StrictTxn
//     (etcdstore, consulstore: the strict check on the lease's own keys,
//     which advances the renewal chain, so clones are safe).
//   - k8s, nats: leases in Lease objects of a kube-apiserver, or a
//     JetStream KV bucket of a nats-server, that the harness starts; the
//     chains are hashes on the machine's Redis fenced by the token alone
//     (redisfence.HSet: neither store has a transaction that could also
//     write the chain), so clones do not run there.
//   - postgres-failover: leases on a PostgreSQL primary with an
//     asynchronous standby that the harness starts, reached through one
//     more proxy, a virtual address; the chains as in k8s and nats (the
//     resource must outlive the database's failovers), and the harness
//     takes a token on another lease of the database every 20 ms, as its
//     other jobs would, logging each.
//   - etcd-cluster, consul-cluster: the same, on a three-member cluster
//     the harness starts on loopback (internal/testserver: etcd bootstrapped
//     statically, Consul as three server agents with -bootstrap-expect 3
//     and -retry-join, their Raft logs on disk). Each worker has one proxy
//     per member and its client gets all three: etcd's client sends its
//     calls to them in turn and drops a connection whose keepalive ping
//     (after 10 s idle, gRPC's least) goes unanswered for a second; the
//     Consul API client takes one address,
//     so the worker's transport sends each request to one member and moves
//     to the next after a request fails on its way.
//   - postgres-slots: the postgres cell with the lease a semaphore of
//     three slots (tenure.Client.CampaignSlot), each slot with a fenced
//     chain and a twin of its own, checked per slot (slots.go); the
//     nemesis strikes the slots' holders in turn.
//
// The twin is written whatever the fence said, with the same token: the
// negative control of the same run.
//
// # The postgres-run cell: tenure run's supervision
//
// In the postgres-run cell each worker is the real tenure binary (found
// beside tenure-chaos, on PATH, or by -tenure): `tenure run --wait --name
// L --ttl 2s --store URL -- tenure-chaos command ...`, its store URL the
// slot's proxy to PostgreSQL; when it exits, the slot starts another
// after TTL/10, as a service manager would. The command logs its tenure
// (TENURE_TOKEN) and starts a writer, whose mode a hash of the token
// picks: zombie-bg (the writer's main thread exits while another thread
// writes, so the thread-group leader reads as a zombie; the command exits
// 0 at once), zombie-setsid (the same after setsid; the command runs on
// for 1–3 × TTL and exits 0), setsid (an ordinary writer after setsid)
// and zombie (in the command's process group). The writer writes pairs
// for 0.5–2 × TTL beyond the command's life, whatever the fence answers:
// the fenced chain in one transaction with pgfence's Fence of its token
// (the token fence), then the twin. The nemesis strikes the tenure run
// processes: SIGSTOP (its watchdog must kill the command), SIGKILL, the
// connection faults and pg_terminate_backend of its sessions, `tenure
// release --force` of the lease, and a freeze: SIGSTOP of tenure run, its
// watchdog and every descendant for 1.5–4 × TTL, the command's processes
// resumed 20–60 ms before tenure run and its watchdog, a pause of the whole machine as far as the
// slot goes. Beyond the fenced resource's invariants the checker holds
// this cell to tenure run's promise ([overlaps]): no write attempt of a
// tenure's writer after a later tenure's first one. Two kinds of late
// writes are counted apart, not as overlaps: a frozen process's within
// TTL/2 after the freeze ended (a machine pause is what only the fence
// covers), and those within a TTL after `tenure release --force` ended the
// tenure (the store lets the next holder in at once; a stopped or slowly
// connected tenure run hears of it late, and its watchdog kills by the
// kill deadline).
//
// # The nemesis
//
// One fault every FaultEvery (±50%), kinds and parameters drawn from the
// seed, mostly aimed at the current holder (asked of the store): SIGSTOP
// for 0.5–5 × TTL (biased toward the long end); SIGKILL and restart; cut,
// black-holed (0.5–3 × TTL) or delayed (50–400 ms for 1–3 × TTL) store
// connections; lost replies (each of the holder's store connections loses
// the next reply after the server carried out the request:
// faultnet.Proxy.LoseReplies); pg_terminate_backend of the holder's
// sessions (postgres, postgres-failover); a restart of the store server
// (redis, etcd, consul, k8s, nats: the servers the harness starts); a
// ±1–4 week jump of the holder's library wall clock
// (tenure.Config.Clock); on postgres-failover, instead of the restart, a
// failover, one at a time: the standby stops, the primary goes on alone
// for 0.2–2 × TTL and is killed, the standby is promoted with what it
// received, the token floor is raised on it (pgstore's RaiseTokenFloor;
// -no-token-floor skips it, the floor's negative control), the virtual
// address moves to it and a new standby is copied from it; on a cluster,
// instead of the restart, faults of one member at a time, each once the
// cluster could lose a member again (every etcd member answering one
// leader; three healthy Consul voters by autopilot, which takes a server
// back as a non-voter after a long pause), so that the cluster keeps its
// quorum, and three TTLs after the last one ended, so that the holders
// write between them: SIGSTOP of the store's leader (asked of the members: etcd's
// Status, Consul's /v1/status/leader) for 1–3 × TTL, SIGKILL of the leader
// and a restart with its data after 0.5–2 × TTL, and the same two faults
// of a follower; after a fault on the leader the harness logs when the
// members agree on the next one; a clone: a second process that adopts the
// holder's tenure state (internal/snapshot; in every cell whose fence is
// strict: not k8s, nats and postgres-failover, fenced by the token alone;
// twice as often on a cluster, whose holders write seldom);
// and a fork:
// the holder starts a child with its environment, command line and history
// file descriptor. The same seed replays the same schedule of kinds, waits
// and parameters; which process is hit depends on who holds the lease.
//
// # The history and the checker
//
// Every process appends JSON lines to one history file (O_APPEND, one
// write per event): starts, grants, losses, every write attempt and
// outcome, snapshots, clock shifts, faults. Each line carries the process's
// ground truth, pid and start time from /proc, which no library state can
// copy. After the run the checker reads the history and both chains and
// fails the cell on any violation at the fenced resource:
//
//   - no stale acceptance: along the chain, tokens never go down;
//   - one writer per token, by ground truth; a clone's writes after the
//     split (the parent's snapshot, taken between two writes) count as a
//     second writer, as in internal/sim;
//   - tokens strictly grow across holder changes along the chain;
//   - no token granted twice, store restarts and failovers included (on
//     postgres-failover, counting the tokens of the other leases too);
//   - no acknowledged write lost: every write a worker saw commit is in
//     the chain, with its token.
//
// On a cluster the checker also follows each member fault to the next
// leader, the next acknowledged fenced write (the write stall) and, when
// that write carried another token, its grant (the takeover): whether the
// holder's tenure outlived the fault ([MemberFault]).
//
// A run with fewer than [MinCycles] "fault → lease lost → new holder"
// cycles is invalid ("faults did not bite"), and a run whose twin shows no
// violation fails as "not exercising".
package chaos
