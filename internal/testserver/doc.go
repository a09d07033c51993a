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
//   - PostgreSQL (postgres.go): the machine's server at
//     [testutil.PostgresURL]; [PostgresPool], [PostgresSchema],
//     [PostgresRole] and friends give each test its own schema and role.
//   - Redis (redis.go): the machine's server at [RedisURL] for most
//     tests, whose keys a test keeps under a [RedisPrefix] of its own;
//     [OwnRedis] starts a redis-server a test may crash and restart.
//   - etcd (etcd.go) and Consul (consul.go): started from
//     $TENURE_ETCD_BIN and $TENURE_CONSUL_BIN (or etcd and consul on PATH;
//     `tools/servers/ensure.sh etcd` and `tools/consul/ensure.sh` build
//     them). A package's TestMain calls [Main] to share one server among
//     its tests ([SharedEtcd], [SharedConsul]); a test that stops or
//     restarts its server starts its own ([OwnEtcd], [OwnConsul]).
//   - nats-server (nats.go): JetStream on file storage, started from
//     $TENURE_NATS_BIN (`tools/servers/ensure.sh nats-server` builds it;
//     never Debian's, too old for per-key TTLs), shared through [Main] ([SharedNats]) or
//     a test's own ([OwnNats]).
//   - MySQL/MariaDB (mysql.go): the machine's server at [MySQLURL]; each
//     test gets tables under a prefix of its own ([MySQLDB],
//     [MySQLConfig], [MySQLDrop]).
//   - A PostgreSQL primary and an asynchronous standby (pgpair.go):
//     [StartPostgresPair] and [OwnPostgresPair], from the same programs as
//     the TLS cluster below; [PostgresPair.Failover] promotes the standby
//     with the WAL it has, and [PostgresPair.StartStandby] copies a new
//     one.
//   - Redis Sentinel (sentinel.go): a primary, a replica and three of
//     Debian's redis-sentinel (or $TENURE_REDIS_SENTINEL_BIN), one set
//     per test ([OwnRedisSentinels]); [RedisSentinels.CutReplication]
//     cuts the replica off and [RedisSentinels.Failover] runs SENTINEL
//     FAILOVER.
//   - PgBouncer (pgbouncer.go): Debian's pgbouncer (or
//     $TENURE_PGBOUNCER_BIN) in transaction mode in front of the
//     machine's PostgreSQL, on a port of its own, one per test
//     ([OwnPgBouncer]); as root it runs as the postgres user.
//   - kube-apiserver and MinIO: in the sub-packages kubeserver and
//     s3server, so that only the test binaries that talk to Kubernetes or
//     S3 compile and link client-go or the AWS SDK. Their shared servers
//     plug into [Main] through [Servers.Others] ([NewShared]).
//   - Clusters of etcd and Consul (etcdcluster.go, consulcluster.go):
//     three members on loopback, each a [Process] of its own that a test
//     or the chaos harness may pause ([Process.Pause], SIGSTOP), kill and
//     restart; etcd bootstrapped statically ([StartEtcdCluster]), Consul
//     as three server agents with -bootstrap-expect 3 and -retry-join
//     ([StartConsulCluster]). [EtcdCluster.Leader] and
//     [ConsulCluster.Leader] ask every member which one leads;
//     [EtcdCluster.Healthy] and [ConsulCluster.Healthy] say whether the
//     cluster could lose a member now.
//   - TLS (tls.go): servers for one test each that speak TLS only, with
//     certificates of a throwaway CA ([testca]): a private PostgreSQL
//     cluster with hostssl lines only ([OwnPostgresTLS]; initdb and
//     postgres from $TENURE_PG_BIN_DIR, run as the postgres user when
//     the tests run as root), redis-server on a TLS port with an ACL user
//     ([OwnRedisTLS]), etcd with client-certificate and password
//     authentication ([OwnEtcdTLS]) and a Consul agent on HTTPS with ACLs
//     ([OwnConsulTLS]).
//
// When a server is unreachable or its binary is missing, the test skips,
// or fails when the environment variable CI is set
// ([testutil.NeedServer]), so CI can never pass on zero tests.
//
// # Conformance harnesses
//
// [PostgresHarness], [MySQLHarness], [SQLiteHarness], [RedisHarness],
// [EtcdHarness], [ConsulHarness] and [NatsHarness] adapt those servers to
// [storetest.Harness] (and kubeserver.Harness the kube-apiserver), so that
// a backend's tests, the client's tests and the check of docs/STORES.md
// share one harness per backend.
//
// Their [storetest.Faults] (faults.go) put a [faultnet] proxy ([Proxy])
// between a store and its server, which [CutFault] cuts and restores, and
// kill and restart a server of the store's own; over the machine's
// PostgreSQL and MySQL, which other tests share, they decline the restart.
package testserver
