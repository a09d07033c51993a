// Package testserver gives tenure's tests the real servers they run
// against, and the chaos harness the servers it crashes. It is for tests
// and the chaos harness only: the library and the tenure command must
// never import it.
//
// # One launcher
//
// [Start] runs one server process: it logs the process's output to a file
// in the server's data directory, waits until [Config.Ready] says the
// server answers as itself (not some other process on the same port), and
// makes sure the process cannot outlive the test binary: it runs in a
// process group of its own that [Process.Kill] kills as a whole, and on
// Linux the kernel kills it when the test binary dies (Pdeathsig).
// [Process.Restart] starts it again on the same ports with the same data;
// [Process.Stop] kills it and removes its data. [Binary] finds a server
// binary and says how to get one; [OnFreePorts] retries a start on fresh
// ports when another process took one first.
//
// # The servers
//
// Each server has a package of its own below this one, and each of those
// is a Go module of its own, so that a store's tests, and the store's
// module graph, hold only that store's client: the modules of the stores
// require these for their tests, and a user's module graph stops at them.
//
//   - pgserver: the machine's PostgreSQL, each test in a schema and role of
//     its own; a private primary with an asynchronous standby to fail over
//     (initdb and postgres from $TENURE_PG_BIN_DIR); PgBouncer in
//     transaction mode (Debian's pgbouncer or $TENURE_PGBOUNCER_BIN); a
//     PostgreSQL cluster that speaks TLS only.
//   - redisserver: the machine's Redis, each test under a key prefix of its
//     own; a redis-server a test may crash and restart; Redis Sentinel (a
//     primary, a replica and three of Debian's redis-sentinel); a TLS
//     redis-server with an ACL user.
//   - etcdserver and consulserver: started from $TENURE_ETCD_BIN and
//     $TENURE_CONSUL_BIN (`tools/servers/ensure.sh etcd` and
//     `tools/consul/ensure.sh` build them), one shared by a package's tests
//     (pass etcdserver.Shared or consulserver.Shared to [Main]) or a test's
//     own; clusters of three members on loopback, each a [Process] a test
//     or the chaos harness may pause, kill and restart; TLS servers with
//     client-certificate or ACL authentication.
//   - natsserver: JetStream on file storage, from $TENURE_NATS_BIN
//     (`tools/servers/ensure.sh nats-server` builds it; never Debian's,
//     too old for per-key TTLs), shared through [Main] or a test's own.
//   - mysqlserver: the machine's MySQL/MariaDB, each test's tables under a
//     prefix of its own.
//   - kubeserver and s3server: kube-apiserver (over an etcd of its own)
//     and MinIO.
//   - sqliteserver: no server, the SQLite harness over a file of a test's
//     own, in a module of its own for the pure-Go SQLite it links.
//
// This package holds what they share: the launcher, [Main] and [Shared]
// for servers a package's tests share, [ClusterSize] and the waits of the
// cluster tests, and testca, a throwaway certificate authority.
//
// When a server is unreachable or its binary is missing, the test skips,
// or fails when the environment variable CI is set
// ([testutil.NeedServer]), so CI can never pass on zero tests.
//
// # Conformance harnesses
//
// Each server package adapts its servers to [storetest.Harness]
// (pgserver.PostgresHarness, mysqlserver.MySQLHarness, redisserver.RedisHarness,
// etcdserver.EtcdHarness, consulserver.ConsulHarness, natsserver.NatsHarness,
// kubeserver.Harness, and sqliteserver.SQLiteHarness over a file), so that a
// backend's tests, the client's tests and the check of docs/STORES.md share
// one harness per backend.
//
// Their [storetest.Faults] put a [faultnet] proxy ([Proxy]) between a store
// and its server, which [CutFault] cuts and restores, and kill and restart a
// server of the store's own; over the machine's PostgreSQL and MySQL, which
// other tests share, they decline the restart ([NoRestartShared]).
package testserver
